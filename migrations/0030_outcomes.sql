-- Outcomes (/sim outcome <id> <what happened>): what really happened, recorded after a
-- simulation, and the report agent's score of the forecast against it (engine.sim.outcome).
-- score: 0-10 overall (NULL until scored); scoring: the whole answer as JSON (per run, what the
-- forecast got right and wrong, with the posts and rounds it cites).
CREATE TABLE sim_outcomes (
    sim_id      TEXT PRIMARY KEY REFERENCES simulations(id) ON DELETE CASCADE,
    outcome     TEXT NOT NULL,
    recorded_by TEXT NOT NULL DEFAULT '',
    recorded_at TEXT NOT NULL,
    score       REAL,
    scoring     TEXT,
    scored_at   TEXT
);
CREATE INDEX sim_outcomes_scored ON sim_outcomes(scored_at);
