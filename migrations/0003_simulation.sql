-- LLM usage: tokens and estimated cost per day, job, scope and model (budget caps read it).
CREATE TABLE llm_usage (
    day               TEXT NOT NULL,             -- UTC date, YYYY-MM-DD
    job               TEXT NOT NULL DEFAULT '',
    scope             TEXT NOT NULL DEFAULT '',
    model             TEXT NOT NULL,
    calls             INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd          REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (day, job, scope, model)
);
CREATE INDEX llm_usage_job ON llm_usage(job);
CREATE INDEX llm_usage_scope_day ON llm_usage(scope, day);

-- One simulation: its request and where its folder lives.
CREATE TABLE simulations (
    id          TEXT PRIMARY KEY,
    scope       TEXT NOT NULL,
    channel     TEXT,
    job_id      TEXT,
    requirement TEXT NOT NULL,
    spec        TEXT NOT NULL DEFAULT '{}',       -- documents, agents, rounds
    folder      TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX simulations_scope ON simulations(scope, created_at);

-- Completed pipeline steps (checkpoints): a resumed simulation skips these.
CREATE TABLE sim_steps (
    sim_id      TEXT NOT NULL REFERENCES simulations(id) ON DELETE CASCADE,
    step        TEXT NOT NULL,
    summary     TEXT NOT NULL DEFAULT '{}',
    llm_calls   INTEGER NOT NULL DEFAULT 0,
    tokens      INTEGER NOT NULL DEFAULT 0,
    finished_at TEXT NOT NULL,
    PRIMARY KEY (sim_id, step)
);

-- The local knowledge graph of a simulation.
CREATE TABLE sim_entities (
    id          INTEGER PRIMARY KEY,
    sim_id      TEXT NOT NULL REFERENCES simulations(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    norm_name   TEXT NOT NULL,
    type        TEXT NOT NULL,
    summary     TEXT NOT NULL DEFAULT '',
    attributes  TEXT NOT NULL DEFAULT '{}',
    aliases     TEXT NOT NULL DEFAULT '[]',
    mentions    INTEGER NOT NULL DEFAULT 1,
    embedding   BLOB
);
CREATE INDEX sim_entities_sim ON sim_entities(sim_id, norm_name);

CREATE TABLE sim_edges (
    id          INTEGER PRIMARY KEY,
    sim_id      TEXT NOT NULL REFERENCES simulations(id) ON DELETE CASCADE,
    source_id   INTEGER NOT NULL REFERENCES sim_entities(id) ON DELETE CASCADE,
    target_id   INTEGER NOT NULL REFERENCES sim_entities(id) ON DELETE CASCADE,
    relation    TEXT NOT NULL,
    fact        TEXT NOT NULL,
    valid_at    TEXT,
    invalid_at  TEXT,
    chunk       INTEGER,
    embedding   BLOB
);
CREATE INDEX sim_edges_sim ON sim_edges(sim_id);
CREATE INDEX sim_edges_source ON sim_edges(source_id);
CREATE INDEX sim_edges_target ON sim_edges(target_id);
