-- Jobs gain the state 'stopped': a simulation stopped on request (/sim stop) ended as asked,
-- neither failed nor cancelled, and resumes from its last round. SQLite cannot change a CHECK
-- constraint in place, so the table is rebuilt with the same columns and index.
CREATE TABLE jobs_new (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    scope       TEXT NOT NULL,
    channel     TEXT,
    title       TEXT NOT NULL DEFAULT '',
    params      TEXT NOT NULL DEFAULT '{}',
    state       TEXT NOT NULL CHECK (state IN ('queued','running','done','failed','cancelled','interrupted',
                                               'stopped')),
    progress    REAL,
    message     TEXT NOT NULL DEFAULT '',
    result      TEXT,
    error       TEXT,
    created_at  TEXT NOT NULL,
    started_at  TEXT,
    finished_at TEXT,
    updated_at  TEXT NOT NULL,
    started_by  TEXT NOT NULL DEFAULT '',
    owner       TEXT
);
INSERT INTO jobs_new(id, kind, scope, channel, title, params, state, progress, message, result, error,
                     created_at, started_at, finished_at, updated_at, started_by, owner)
    SELECT id, kind, scope, channel, title, params, state, progress, message, result, error,
           created_at, started_at, finished_at, updated_at, started_by, owner FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_scope_state ON jobs(scope, state);
