-- PostgreSQL twin of migrations/0011_ingest.sql (bot and update ids are given, never assigned).
-- Telegram updates are stored here before their offset is confirmed to Telegram (the next
-- getUpdates), and deleted once handled: a crash between the two loses nothing, and at
-- start-up what is left is handled first.
CREATE TABLE telegram_inbox (
    bot_id      BIGINT NOT NULL,           -- the bot account (getMe id): one database may serve several
    update_id   BIGINT NOT NULL,
    payload     TEXT NOT NULL,             -- the update as the Bot API sent it (JSON)
    received_at TEXT NOT NULL,
    PRIMARY KEY (bot_id, update_id)
);

-- The highest update_id stored per bot account: polling resumes after it, and an update at or
-- below it that Telegram sends again is not stored twice.
CREATE TABLE telegram_offsets (
    bot_id         BIGINT PRIMARY KEY,
    last_update_id BIGINT NOT NULL
);
