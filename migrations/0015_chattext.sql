-- Chat text fitted for search (engine/memory/chattext.py). A message is indexed by its speaker's
-- name (column `author`) and its `search_text`: the text, its attachments' names and captions,
-- and the absolute dates its relative date expressions resolve to ("yesterday" sent on 8 May 2023
-- is also "7 May 2023"), filled at ingest. The porter stemmer lets "researching" find "research".
-- FTS rowid stays memory_messages.id. Column weights stay equal, so a plain bm25(memory_messages_fts)
-- ranks right: a name is one token in a short column, so length normalisation already lifts it
-- where it is rare (many speakers) and IDF lowers it where it is everywhere (two speakers);
-- author weights 0.25..2 measured the same on LoCoMo (bench/RESULTS.md).
ALTER TABLE memory_messages ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
-- Messages stored before: searchable at once by speaker and text; the engine adds the dates they
-- name at its next start (chattext.fit_stored) and empties this list as it goes.
UPDATE memory_messages SET search_text = text;
CREATE TABLE memory_messages_unfitted (id INTEGER PRIMARY KEY);
INSERT INTO memory_messages_unfitted(id) SELECT id FROM memory_messages;

DROP TRIGGER memory_messages_ai;
DROP TRIGGER memory_messages_ad;
DROP TABLE memory_messages_fts;
CREATE VIRTUAL TABLE memory_messages_fts USING fts5(
    author, search_text, content='memory_messages', content_rowid='id', tokenize='porter unicode61');
INSERT INTO memory_messages_fts(memory_messages_fts) VALUES ('rebuild');
CREATE TRIGGER memory_messages_ai AFTER INSERT ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(rowid, author, search_text) VALUES (new.id, new.author, new.search_text);
END;
CREATE TRIGGER memory_messages_ad AFTER DELETE ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(memory_messages_fts, rowid, author, search_text)
        VALUES ('delete', old.id, old.author, old.search_text);
END;
CREATE TRIGGER memory_messages_au AFTER UPDATE OF author, search_text ON memory_messages BEGIN
    INSERT INTO memory_messages_fts(memory_messages_fts, rowid, author, search_text)
        VALUES ('delete', old.id, old.author, old.search_text);
    INSERT INTO memory_messages_fts(rowid, author, search_text) VALUES (new.id, new.author, new.search_text);
END;

-- Beliefs: the same tokenizer, so one query (textutil.fts_query) searches both alike.
DROP TRIGGER beliefs_ai;
DROP TRIGGER beliefs_ad;
DROP TABLE beliefs_fts;
CREATE VIRTUAL TABLE beliefs_fts USING fts5(text, tokenize='porter unicode61');
INSERT INTO beliefs_fts(rowid, text) SELECT id, subject || ' ' || predicate || ' ' || object FROM beliefs;
CREATE TRIGGER beliefs_ai AFTER INSERT ON beliefs BEGIN
    INSERT INTO beliefs_fts(rowid, text) VALUES (new.id, new.subject || ' ' || new.predicate || ' ' || new.object);
END;
CREATE TRIGGER beliefs_ad AFTER DELETE ON beliefs BEGIN
    DELETE FROM beliefs_fts WHERE rowid = old.id;
END;
