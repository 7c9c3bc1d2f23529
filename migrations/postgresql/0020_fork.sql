-- PostgreSQL twin of migrations/0020_fork.sql.
-- Lineage of forked simulations (/sim fork): the simulation it was forked from, the round
-- (1-based) whose end state it starts from, and the event injected at the next round, if any.
ALTER TABLE simulations ADD COLUMN parent_id TEXT;
ALTER TABLE simulations ADD COLUMN fork_round BIGINT;
ALTER TABLE simulations ADD COLUMN fork_event TEXT;
