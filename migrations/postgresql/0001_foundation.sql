-- PostgreSQL twin of migrations/0001_foundation.sql (same tables, columns, keys and defaults).
-- Vectors are pgvector `vector` columns from 0002 on; the extension is enabled here, once.
CREATE EXTENSION IF NOT EXISTS vector;

-- Background jobs (simulations, extraction batches) and per-channel settings.
CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,  -- SQLite's implicit rowid: insertion order for ties
    kind        TEXT NOT NULL,
    scope       TEXT NOT NULL,
    channel     TEXT,
    title       TEXT NOT NULL DEFAULT '',
    params      TEXT NOT NULL DEFAULT '{}',
    state       TEXT NOT NULL CONSTRAINT jobs_state_check
                CHECK (state IN ('queued','running','done','failed','cancelled','interrupted')),
    progress    DOUBLE PRECISION,
    message     TEXT NOT NULL DEFAULT '',
    result      TEXT,
    error       TEXT,
    created_at  TEXT NOT NULL,
    started_at  TEXT,
    finished_at TEXT,
    updated_at  TEXT NOT NULL
);
CREATE INDEX jobs_scope_state ON jobs(scope, state);

-- Key/value settings per chat scope and channel ('' channel = whole scope).
CREATE TABLE channel_settings (
    scope   TEXT NOT NULL,
    channel TEXT NOT NULL DEFAULT '',
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (scope, channel, key)
);
-- Other bot processes cache channel settings: every change tells them (LISTEN worldbot_changes,
-- engine/db/postgres.py) with this session's server pid, so the writer can skip its own notice.
-- PostgreSQL only (SQLite's readers watch data_version instead); delivered at commit, once per
-- transaction.
CREATE FUNCTION worldbot_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('worldbot_changes', pg_backend_pid()::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER channel_settings_notify_changes AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON channel_settings
    FOR EACH STATEMENT EXECUTE FUNCTION worldbot_notify_change();
