-- Simulation runs (step 4): where each run stands, so a lost process is resumed from its checkpoint.
CREATE TABLE sim_runs (
    sim_id         TEXT PRIMARY KEY,
    folder         TEXT NOT NULL,
    job_id         TEXT,
    status         TEXT NOT NULL CHECK (status IN ('running','idle','completed','stopped','failed',
                                                    'cancelled','interrupted')),
    rounds_total   INTEGER NOT NULL DEFAULT 0,
    rounds_done    TEXT NOT NULL DEFAULT '{}',   -- {"twitter": 3, "reddit": 2}: completed rounds
    actions        TEXT NOT NULL DEFAULT '{}',   -- actions logged so far per platform
    pid            INTEGER,                      -- the child process (leader of its process group)
    restart_reason TEXT NOT NULL DEFAULT '',     -- why a resumed run started over, if it did
    error          TEXT,
    started_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX sim_runs_status ON sim_runs(status);

-- Every interview answer, during a run or after it.
CREATE TABLE sim_interviews (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    sim_id     TEXT NOT NULL,
    platform   TEXT NOT NULL,
    agent_id   INTEGER NOT NULL,
    agent_name TEXT NOT NULL DEFAULT '',
    question   TEXT NOT NULL,
    answer     TEXT,
    error      TEXT,
    round      INTEGER NOT NULL,                 -- rounds completed when it was asked
    asked_by   TEXT NOT NULL DEFAULT '',
    asked_at   TEXT NOT NULL
);
CREATE INDEX sim_interviews_sim ON sim_interviews(sim_id, id);
