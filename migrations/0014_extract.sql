-- Supersession follows time from now on (engine/memory/beliefs.py). Beliefs stored before could
-- end where they had not begun yet: an older statement extracted later (an import, a backlog)
-- superseded a newer one, so the newer one got an invalid_at before its valid_from. Repair them
-- (timestamps are UTC ISO 8601 with microseconds, so they compare as text).
-- 1. An older statement still active that ended a newer one now ends where the earliest of those
--    begins, superseded by it.
UPDATE beliefs AS n SET invalid_at = o.valid_from, superseded_by = o.id
FROM (SELECT id, superseded_by AS ended_by, valid_from,
             row_number() OVER (PARTITION BY superseded_by ORDER BY valid_from, id) AS k
      FROM beliefs WHERE invalid_at < valid_from) AS o
WHERE o.ended_by = n.id AND o.k = 1 AND n.invalid_at IS NULL;
-- 2. That newer belief is valid again.
UPDATE beliefs SET invalid_at = NULL, superseded_by = NULL
WHERE invalid_at < valid_from
  AND EXISTS (SELECT 1 FROM beliefs n WHERE n.id = beliefs.superseded_by AND n.superseded_by = beliefs.id);
-- 3. Any other belief ended before it began (its successor was superseded since) stays history,
--    ended where it begins.
UPDATE beliefs SET invalid_at = valid_from WHERE invalid_at < valid_from;
