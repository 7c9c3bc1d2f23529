-- Store first, embed later (engine/memory/pending.py): a chat message is stored the moment it
-- arrives, keyword-searchable and within its audience, before it has a vector or a world. Such a
-- *pending* row has world_id and embedding NULL; `audience` is who may read it until it is
-- routed (then its world's audience rules and the column is NULL again); `claimed_by` names the
-- process (owners.id) embedding it, so two processes sharing a database never embed one row twice
-- and a dead process's claims are taken over.
-- SQLite cannot drop a NOT NULL: the table is rebuilt with the same ids (the contentless FTS5
-- index keeps its rowids), then its indexes and triggers are made again.
CREATE TABLE memory_messages_new (
    id           INTEGER PRIMARY KEY,
    scope        TEXT NOT NULL,
    world_id     TEXT REFERENCES worlds(id) ON DELETE CASCADE,   -- NULL while pending
    channel      TEXT NOT NULL,
    message_id   TEXT NOT NULL,                 -- the platform's id ('' when it has none)
    author       TEXT NOT NULL,
    text         TEXT NOT NULL,
    ts           TEXT NOT NULL,
    embedding    BLOB,                          -- NULL while pending
    extracted    INTEGER NOT NULL DEFAULT 0,    -- 1 once belief extraction has read it
    author_id    TEXT NOT NULL DEFAULT '',
    search_text  TEXT NOT NULL DEFAULT '',
    search_terms TEXT NOT NULL DEFAULT '',
    audience     TEXT,                          -- pending: who may read it; NULL once routed
    claimed_by   TEXT                           -- pending: the process embedding it
);
INSERT INTO memory_messages_new(id, scope, world_id, channel, message_id, author, text, ts, embedding, extracted,
                                author_id, search_text, search_terms)
    SELECT id, scope, world_id, channel, message_id, author, text, ts, embedding, extracted,
           author_id, search_text, search_terms FROM memory_messages;
DROP TABLE memory_messages;
ALTER TABLE memory_messages_new RENAME TO memory_messages;
CREATE INDEX memory_messages_world ON memory_messages(world_id, id);
CREATE INDEX memory_messages_channel ON memory_messages(scope, channel, id);
CREATE INDEX memory_messages_pending ON memory_messages(scope, channel, extracted);
CREATE UNIQUE INDEX memory_messages_platform_id ON memory_messages(scope, channel, message_id)
    WHERE message_id <> '';
CREATE INDEX memory_messages_author ON memory_messages(scope, author_id);
CREATE INDEX memory_messages_scope ON memory_messages(scope, id);
CREATE INDEX memory_messages_unrouted ON memory_messages(scope, id) WHERE world_id IS NULL;

CREATE TRIGGER memory_messages_ai AFTER INSERT ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(rowid, scope_key, terms) VALUES (new.id, 's' || hex(new.scope), new.search_terms);
END;
CREATE TRIGGER memory_messages_ad AFTER DELETE ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(memory_messages_fts, rowid, scope_key, terms)
        VALUES ('delete', old.id, 's' || hex(old.scope), old.search_terms);
END;
CREATE TRIGGER memory_messages_au AFTER UPDATE OF scope, search_terms ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(memory_messages_fts, rowid, scope_key, terms)
        VALUES ('delete', old.id, 's' || hex(old.scope), old.search_terms);
    INSERT INTO memory_messages_fts(rowid, scope_key, terms) VALUES (new.id, 's' || hex(new.scope), new.search_terms);
END;
-- A pending row changes no world: only its routing (UPDATE OF world_id) moves the scope's stamp.
CREATE TRIGGER memory_messages_stamp_ai AFTER INSERT ON memory_messages WHEN new.world_id IS NOT NULL BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (new.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER memory_messages_stamp_au AFTER UPDATE OF world_id ON memory_messages BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (new.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER memory_messages_stamp_ad AFTER DELETE ON memory_messages BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (old.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
