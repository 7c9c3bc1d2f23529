-- PostgreSQL twin of migrations/0029_ensembles.sql.
-- Ensembles (/simulate --runs N): one simulation whose step 4 is N runs with different seeds.
-- Each run is a simulation of its own (``<head id>-r<K>``) that shares the head's steps 1-3:
-- ``ensemble_of`` names the head and ``run_no`` is K (1..N); both are NULL for any other
-- simulation. The runs are listed under their head, never on their own (engine.sim.ensemble).
ALTER TABLE simulations ADD COLUMN ensemble_of TEXT;
ALTER TABLE simulations ADD COLUMN run_no BIGINT;
CREATE INDEX simulations_ensemble ON simulations(ensemble_of, run_no);

-- What a job counts for against its kind's caps ([simulation] max_active_per_*): an ensemble of
-- N runs counts as N simulations, any other job as 1.
ALTER TABLE jobs ADD COLUMN weight BIGINT NOT NULL DEFAULT 1;
