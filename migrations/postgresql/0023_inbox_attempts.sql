-- PostgreSQL twin of migrations/0023_inbox_attempts.sql.
-- How often each stored Telegram update was handed to the bot, written before it is handed
-- over: an update left over by two runs that both stopped while handling it is set aside at
-- the next start instead of being handed over again (bot/adapters/telegram_inbox.py).
ALTER TABLE telegram_inbox ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
