-- Daily digest subscriptions per chat channel, restored by the scheduler at start-up.
CREATE TABLE digest_subscriptions (
    scope        TEXT NOT NULL,
    channel      TEXT NOT NULL,
    time         TEXT NOT NULL,            -- HH:MM in the subscription's time zone
    timezone     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    last_sent_at TEXT,                     -- UTC ISO time of the last posted digest
    PRIMARY KEY (scope, channel)
);

-- When each scheduled maintenance task last ran ('merge'), to catch up after downtime.
CREATE TABLE schedule_runs (
    name     TEXT PRIMARY KEY,
    last_run TEXT NOT NULL
);
