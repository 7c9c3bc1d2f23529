-- Who spends: LLM usage rows name the person the work was done for (engine.trust user_key,
-- '' when nobody in particular), so per-person daily caps read them. SQLite cannot change a
-- primary key in place, so the table is rebuilt with the same rows (theirs: '').
CREATE TABLE llm_usage_new (
    day               TEXT NOT NULL,             -- UTC date, YYYY-MM-DD
    job               TEXT NOT NULL DEFAULT '',  -- a job's id, or the activity of work that is not a job
    scope             TEXT NOT NULL DEFAULT '',
    model             TEXT NOT NULL,
    calls             INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd          REAL NOT NULL DEFAULT 0,
    spender           TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (day, job, scope, spender, model)
);
INSERT INTO llm_usage_new(day, job, scope, model, calls, prompt_tokens, completion_tokens, cost_usd)
    SELECT day, job, scope, model, calls, prompt_tokens, completion_tokens, cost_usd FROM llm_usage;
DROP TABLE llm_usage;
ALTER TABLE llm_usage_new RENAME TO llm_usage;
CREATE INDEX llm_usage_job ON llm_usage(job);
CREATE INDEX llm_usage_scope_day ON llm_usage(scope, day);
CREATE INDEX llm_usage_spender_day ON llm_usage(spender, day);

-- Cost-bearing commands each person used, for the per-person rate limit (engine.rates); rows
-- older than the window are deleted as new ones come.
CREATE TABLE costly_uses (
    id      INTEGER PRIMARY KEY,
    spender TEXT NOT NULL,
    command TEXT NOT NULL DEFAULT '',
    at      REAL NOT NULL                      -- unix time
);
CREATE INDEX costly_uses_spender ON costly_uses(spender, at);
CREATE INDEX costly_uses_at ON costly_uses(at);

-- The fair job queue (engine.jobs): each job that starts takes the next turn, so the scope and
-- the person served least recently go first; caps count a person's unfinished jobs.
ALTER TABLE jobs ADD COLUMN turn INTEGER;
CREATE INDEX jobs_turn ON jobs(turn);
CREATE INDEX jobs_starter_state ON jobs(started_by, state);
