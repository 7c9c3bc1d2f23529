-- A simulation belongs to the audience of the channel it started in (engine.memory.audience:
-- '' every member of the scope, else the key of a restricted audience); a fork, to its parent's
-- (or to the audience of the channel it was asked in, when the parent is public). Every chat path
-- shows or acts on a simulation only where that audience reads.
-- Simulations started before: the audience their channel was last recorded with, else public
-- (a channel never recorded counts as public, as memory and digests count it).
ALTER TABLE simulations ADD COLUMN audience TEXT NOT NULL DEFAULT '';
UPDATE simulations SET audience = coalesce(
    (SELECT a.audience FROM channel_audiences a WHERE a.scope = simulations.scope AND a.channel = simulations.channel),
    '');
