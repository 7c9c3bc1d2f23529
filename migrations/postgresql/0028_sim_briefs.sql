-- PostgreSQL twin of migrations/0028_sim_briefs.sql.
-- The seed brief of a simulation started without a document (engine/sim/seed): drafted by the LLM
-- from the requirement, or taken from this chat's memory. A brief from memory keeps its lines here
-- with the memory ids they came from, so a member's /forget removes their lines from briefs no run
-- has read yet (removed), and a simulation whose run had read them says how many were forgotten
-- since (forgotten). documents/brief.md in the simulation's folder is rendered from these rows.
CREATE TABLE sim_briefs (
    sim_id    TEXT PRIMARY KEY REFERENCES simulations(id) ON DELETE CASCADE,
    origin    TEXT NOT NULL,                -- 'drafted' or 'memory'
    source    TEXT NOT NULL DEFAULT '',     -- what it was taken from, as a person reads it
    built_at  TEXT NOT NULL,
    zone      TEXT NOT NULL DEFAULT 'UTC',  -- the time zone its times are written in
    left_out  BIGINT NOT NULL DEFAULT 0,   -- messages of members who had opted out of memory
    more      BIGINT NOT NULL DEFAULT 0,   -- 1: older messages than the brief may hold were left out
    removed   BIGINT NOT NULL DEFAULT 0,   -- lines forgotten before a run read the brief (gone from it)
    forgotten BIGINT NOT NULL DEFAULT 0    -- lines forgotten after a run had read the brief
);

CREATE TABLE sim_brief_lines (
    sim_id    TEXT NOT NULL REFERENCES simulations(id) ON DELETE CASCADE,
    line      BIGINT NOT NULL,             -- its place in the brief
    kind      TEXT NOT NULL,                -- 'message' or 'belief'
    source_id BIGINT NOT NULL,             -- memory_messages.id or beliefs.id
    sources   TEXT NOT NULL DEFAULT '[]',   -- JSON: the memory message ids it rests on
    author    TEXT NOT NULL DEFAULT '',     -- who said it (a belief: who said what it rests on)
    ts        TEXT NOT NULL,                -- when it was said (a belief: when the brief was taken)
    text      TEXT NOT NULL,
    PRIMARY KEY (sim_id, line)
);
