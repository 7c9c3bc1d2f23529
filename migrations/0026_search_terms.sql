-- Keyword search in every language, each scope searched alone (engine/memory/terms.py,
-- engine/memory/keyword_sql.py). The engine now writes the tokens a row is searched by:
-- `search_terms`, space-separated, already segmented (Thai, Chinese, Japanese), stemmed in the
-- row's language and folded; the index only splits them at spaces (FTS5's `ascii` tokenizer:
-- a token is letters and digits, whatever their script). The speaker's name comes first, the
-- resolved dates last (chattext).
-- Each row also holds its scope as a token of a column of its own, and every query asks for
-- it: FTS5 then walks only the scope's rows (a posting-list intersection), so another server's
-- size no longer changes how many matches this server's search scores. Its bm25 weight is 0.
-- The index is contentless (it keeps no copy of the text); triggers give it the old values to
-- delete.
ALTER TABLE memory_messages ADD COLUMN search_terms TEXT NOT NULL DEFAULT '';
ALTER TABLE beliefs ADD COLUMN search_terms TEXT NOT NULL DEFAULT '';
-- Every stored row is refitted (tokens computed) at the engine's next start (chattext.fit_stored);
-- until then it is found by its vector only.
INSERT OR IGNORE INTO memory_messages_unfitted(id) SELECT id FROM memory_messages;
CREATE TABLE beliefs_unfitted (id INTEGER PRIMARY KEY);
INSERT INTO beliefs_unfitted(id) SELECT id FROM beliefs;

DROP TRIGGER memory_messages_ai;
DROP TRIGGER memory_messages_ad;
DROP TRIGGER memory_messages_au;
DROP TABLE memory_messages_fts;
CREATE VIRTUAL TABLE memory_messages_fts USING fts5(scope_key, terms, content='', tokenize='ascii');
INSERT INTO memory_messages_fts(rowid, scope_key, terms) SELECT id, 's' || hex(scope), search_terms FROM memory_messages;
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

DROP TRIGGER beliefs_ai;
DROP TRIGGER beliefs_ad;
DROP TABLE beliefs_fts;
CREATE VIRTUAL TABLE beliefs_fts USING fts5(scope_key, terms, content='', tokenize='ascii');
INSERT INTO beliefs_fts(rowid, scope_key, terms) SELECT id, 's' || hex(scope), search_terms FROM beliefs;
CREATE TRIGGER beliefs_ai AFTER INSERT ON beliefs BEGIN
    INSERT INTO beliefs_fts(rowid, scope_key, terms) VALUES (new.id, 's' || hex(new.scope), new.search_terms);
END;
CREATE TRIGGER beliefs_ad AFTER DELETE ON beliefs BEGIN
    INSERT INTO beliefs_fts(beliefs_fts, rowid, scope_key, terms)
        VALUES ('delete', old.id, 's' || hex(old.scope), old.search_terms);
END;
CREATE TRIGGER beliefs_au AFTER UPDATE OF scope, search_terms ON beliefs BEGIN
    INSERT INTO beliefs_fts(beliefs_fts, rowid, scope_key, terms)
        VALUES ('delete', old.id, 's' || hex(old.scope), old.search_terms);
    INSERT INTO beliefs_fts(rowid, scope_key, terms) VALUES (new.id, 's' || hex(new.scope), new.search_terms);
END;

-- The vector index of a scope catches up on the rows stored since it last looked
-- (engine/memory/message_index.py): a range of this index, where a range of ids also read every
-- other server's rows stored since (bench/scope_latency.py: 2 s a recall beside 300k of them).
CREATE INDEX memory_messages_scope ON memory_messages(scope, id);
CREATE INDEX beliefs_scope ON beliefs(scope, id);
