-- PostgreSQL twin of migrations/0010_leases.sql.
-- Processes that share the database: each process start is one owner with a lease that its
-- heartbeat renews; jobs and simulation runs name the owner that runs them, so a process that
-- starts later recovers only what a gone owner left behind.
CREATE TABLE owners (
    id          TEXT PRIMARY KEY,            -- host:pid:token, unique per process start
    host        TEXT NOT NULL,
    pid         BIGINT NOT NULL,
    pid_started TEXT NOT NULL DEFAULT '',    -- start time of that pid (/proc), to tell a reused pid
    lease_until DOUBLE PRECISION NOT NULL,   -- unix time; past it the owner counts as gone
    started_at  TEXT NOT NULL
);

ALTER TABLE jobs ADD COLUMN owner TEXT;      -- owners.id of the process that runs (or last ran) it
ALTER TABLE sim_runs ADD COLUMN owner TEXT;  -- owners.id of the process whose child runs it
