-- Channel privacy inside a scope. A channel that not every member of the server can read has
-- an *audience* key of its own ('' is the public audience); its messages live in worlds of that
-- audience only, so topics, beliefs and digests are built from what that audience can read.
-- A viewer in a channel of audience A sees the worlds of '' and of A, nothing else.
ALTER TABLE worlds ADD COLUMN audience TEXT NOT NULL DEFAULT '';
CREATE INDEX worlds_scope_audience ON worlds(scope, audience);

-- The merge record keeps the audience of the worlds it joined (merges never cross audiences).
ALTER TABLE world_merges ADD COLUMN audience TEXT NOT NULL DEFAULT '';

-- The audience each channel was last seen with; a change moves the channel's messages (and the
-- beliefs resting on them) to the new audience's worlds. Channels not listed are public.
CREATE TABLE channel_audiences (
    scope      TEXT NOT NULL,
    channel    TEXT NOT NULL,
    audience   TEXT NOT NULL,
    changed_at TEXT NOT NULL,
    PRIMARY KEY (scope, channel)
);
