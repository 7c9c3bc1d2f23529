-- PostgreSQL twin of migrations/0012_run_budgets.sql.
-- LLM usage of simulation runs, recorded once: per run and child process, the cumulative totals
-- already added to llm_usage (the child reports cumulative totals; only the difference is new).
CREATE TABLE sim_run_usage (
    sim_id            TEXT NOT NULL,
    process           TEXT NOT NULL,             -- token of one child process
    calls             BIGINT NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (sim_id, process)
);

-- The chat scope a run spends from (its daily LLM budget), next to the job it spends for.
ALTER TABLE sim_runs ADD COLUMN scope TEXT;
