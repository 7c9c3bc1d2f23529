-- Report chat (engine/sim/report/chat_store.py): questions asked to a simulation's report agent
-- with /report <sim> ask, or by replying to the report's messages, and the answers given. The
-- last few exchanges of a simulation in a channel go into the next question's prompt.
CREATE TABLE report_chat (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sim_id      TEXT NOT NULL REFERENCES simulations(id) ON DELETE CASCADE,
    scope       TEXT NOT NULL,
    channel     TEXT NOT NULL,
    asked_by    TEXT NOT NULL DEFAULT '',
    question    TEXT NOT NULL,
    answer      TEXT NOT NULL,
    tool_calls  INTEGER NOT NULL,
    unverified  INTEGER NOT NULL,            -- citations no tool (and not the report) returned
    asked_at    TEXT NOT NULL
);
CREATE INDEX report_chat_channel ON report_chat(sim_id, scope, channel, id);

-- The bot's messages that carry a report or a report chat answer: a reply to one (Discord's
-- message reference, Telegram's reply_to_message) is a question to that simulation's report.
CREATE TABLE report_messages (
    scope       TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    sim_id      TEXT NOT NULL REFERENCES simulations(id) ON DELETE CASCADE,
    channel     TEXT NOT NULL,
    posted_at   TEXT NOT NULL,
    PRIMARY KEY (scope, message_id)
);
