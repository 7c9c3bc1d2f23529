-- PostgreSQL twin of migrations/0016_estimates.sql: jobs gain the state 'stopped' (a simulation
-- stopped on request ended as asked and resumes from its last round). PostgreSQL swaps the CHECK
-- constraint in place where SQLite rebuilds the table.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued','running','done','failed','cancelled','interrupted','stopped'));
