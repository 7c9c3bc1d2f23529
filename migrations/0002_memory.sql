-- WorldNodes memory: topic worlds per chat scope, the messages they hold (evidence), the
-- beliefs extracted from them, and the record of merges. Vectors are float32 BLOBs.
CREATE TABLE worlds (
    id           TEXT PRIMARY KEY,            -- 8 characters
    scope        TEXT NOT NULL,
    topic        TEXT NOT NULL DEFAULT '',
    topic_size   INTEGER NOT NULL DEFAULT 0,  -- evidence count when the topic was last named
    centroid     BLOB NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,  -- messages absorbed
    created_at   TEXT NOT NULL,
    last_active  TEXT NOT NULL
);
CREATE INDEX worlds_scope ON worlds(scope);

CREATE TABLE memory_messages (
    id         INTEGER PRIMARY KEY,
    scope      TEXT NOT NULL,
    world_id   TEXT NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
    channel    TEXT NOT NULL,
    message_id TEXT NOT NULL,                 -- the platform's id ('' when it has none)
    author     TEXT NOT NULL,
    text       TEXT NOT NULL,
    ts         TEXT NOT NULL,
    embedding  BLOB NOT NULL,
    extracted  INTEGER NOT NULL DEFAULT 0     -- 1 once belief extraction has read it
);
CREATE INDEX memory_messages_world ON memory_messages(world_id, id);
CREATE INDEX memory_messages_channel ON memory_messages(scope, channel, id);
CREATE INDEX memory_messages_pending ON memory_messages(scope, channel, extracted);
CREATE UNIQUE INDEX memory_messages_platform_id ON memory_messages(scope, channel, message_id)
    WHERE message_id <> '';

CREATE TABLE beliefs (
    id            INTEGER PRIMARY KEY,
    scope         TEXT NOT NULL,
    world_id      TEXT NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
    subject       TEXT NOT NULL,
    predicate     TEXT NOT NULL,
    object        TEXT NOT NULL,
    norm_key      TEXT NOT NULL,              -- normalised subject|predicate, for contradictions
    norm_object   TEXT NOT NULL,
    confidence    REAL NOT NULL,
    sources       TEXT NOT NULL DEFAULT '[]', -- JSON list of memory_messages ids
    learned_at    TEXT NOT NULL,
    valid_from    TEXT NOT NULL,
    invalid_at    TEXT,                       -- set when a contradicting belief superseded it
    superseded_by INTEGER,
    decayed_at    TEXT NOT NULL,              -- confidence decays from here (reset when seen again)
    embedding     BLOB NOT NULL
);
CREATE INDEX beliefs_world ON beliefs(world_id, norm_key);
CREATE INDEX beliefs_scope_learned ON beliefs(scope, learned_at);

CREATE TABLE world_merges (
    id             INTEGER PRIMARY KEY,
    scope          TEXT NOT NULL,
    kept_id        TEXT NOT NULL,
    absorbed_id    TEXT NOT NULL,
    absorbed_topic TEXT NOT NULL,
    similarity     REAL NOT NULL,
    merged_at      TEXT NOT NULL
);
CREATE INDEX world_merges_scope ON world_merges(scope, merged_at);

-- Keyword side of recall: full-text indexes kept in step with their tables by triggers.
CREATE VIRTUAL TABLE memory_messages_fts USING fts5(text, content='memory_messages', content_rowid='id');
CREATE TRIGGER memory_messages_ai AFTER INSERT ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memory_messages_ad AFTER DELETE ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(memory_messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

CREATE VIRTUAL TABLE beliefs_fts USING fts5(text);
CREATE TRIGGER beliefs_ai AFTER INSERT ON beliefs BEGIN
    INSERT INTO beliefs_fts(rowid, text) VALUES (new.id, new.subject || ' ' || new.predicate || ' ' || new.object);
END;
CREATE TRIGGER beliefs_ad AFTER DELETE ON beliefs BEGIN
    DELETE FROM beliefs_fts WHERE rowid = old.id;
END;
