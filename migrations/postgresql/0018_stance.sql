-- PostgreSQL twin of migrations/0018_stance.sql.
-- Beliefs per round (engine/sim/stance.py): after each completed round of a platform, the
-- stance of every agent active in it towards the requirement's subject. score in [-1, 1];
-- label 'for' (> 0.2), 'against' (< -0.2), else 'neutral'; round is 1-based.
CREATE TABLE sim_stances (
    sim_id   TEXT NOT NULL,
    platform TEXT NOT NULL,
    round    BIGINT NOT NULL,
    agent_id BIGINT NOT NULL,
    score    DOUBLE PRECISION NOT NULL,
    label    TEXT NOT NULL,
    PRIMARY KEY (sim_id, platform, round, agent_id)
);

-- The stances of that table an agent carried over: it acted without content that round (did
-- nothing, only followed, its step skipped) and keeps its last score (or its persona's prior).
CREATE TABLE sim_stances_carried (
    sim_id   TEXT NOT NULL,
    platform TEXT NOT NULL,
    round    BIGINT NOT NULL,
    agent_id BIGINT NOT NULL,
    PRIMARY KEY (sim_id, platform, round, agent_id)
);

-- Rounds whose classification was skipped, and why (an LLM budget reached, an unusable answer);
-- a later observation of the round (a resume) tries again and removes the note when it succeeds.
CREATE TABLE sim_stance_skips (
    sim_id   TEXT NOT NULL,
    platform TEXT NOT NULL,
    round    BIGINT NOT NULL,
    reason   TEXT NOT NULL,
    PRIMARY KEY (sim_id, platform, round)
);
