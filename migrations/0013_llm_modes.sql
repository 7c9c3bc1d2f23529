-- The structured-output mode each LLM endpoint and model is known to take (json_schema,
-- json_object, json_object_bare or prompt), learnt when the endpoint refused a stronger one.
-- Read on first use, so a restarted bot does not send a request the endpoint refuses.
CREATE TABLE llm_modes (
    endpoint   TEXT NOT NULL,             -- base_url without a trailing slash
    model      TEXT NOT NULL,
    mode       TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',  -- the refusal that taught it (status and message)
    learned_at TEXT NOT NULL,             -- UTC, ISO 8601
    PRIMARY KEY (endpoint, model)
);
