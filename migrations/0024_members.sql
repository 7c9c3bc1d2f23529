-- Members own their memory (engine/memory/members.py). A member who turned memory off for
-- themselves in a scope (/memory off me): none of their messages is stored there, by any path
-- (live, backfill, a replayed inbox, an import), until they turn it on again. author_name is the
-- name they last had there: an import that gives no author ids is matched by it.
CREATE TABLE memory_optouts (
    scope       TEXT NOT NULL,
    author_id   TEXT NOT NULL,
    author_name TEXT NOT NULL DEFAULT '',
    since       TEXT NOT NULL,              -- UTC ISO 8601
    PRIMARY KEY (scope, author_id)
);

-- Lifecycle (engine/memory/lifecycle.py): a belief whose confidence decayed below
-- [memory] belief_floor is retired (kept as history, out of recall and /world); a world with no
-- belief left in recall, quiet for [memory] world_ttl_days, is archived (out of routing, /worlds
-- and digests; its messages stay recallable as evidence). Nothing is deleted by decay.
ALTER TABLE beliefs ADD COLUMN retired_at TEXT;
ALTER TABLE worlds ADD COLUMN archived_at TEXT;
