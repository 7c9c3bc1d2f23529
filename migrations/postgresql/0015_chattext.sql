-- PostgreSQL twin of migrations/0015_chattext.sql. A message is searched by its speaker's name
-- (column `author`) and its `search_text`, stemmed like FTS5's porter tokenizer: the 'english'
-- configuration (Snowball stemmer; its stop words are words textutil.fts_query never asks for).
-- The two columns are two tsvectors joined, so a phrase never runs from the name into the text.
ALTER TABLE memory_messages ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
-- Messages stored before: searchable at once by speaker and text; the engine adds the dates they
-- name at its next start (chattext.fit_stored) and empties this list as it goes.
UPDATE memory_messages SET search_text = text;
CREATE TABLE memory_messages_unfitted (id BIGINT PRIMARY KEY);
INSERT INTO memory_messages_unfitted(id) SELECT id FROM memory_messages;

ALTER TABLE memory_messages DROP COLUMN search_tsv;   -- its GIN index goes with it
ALTER TABLE memory_messages ADD COLUMN search_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english', author) || to_tsvector('english', search_text)) STORED;
CREATE INDEX memory_messages_search ON memory_messages USING gin (search_tsv);

-- Beliefs: the same configuration, so one query searches both alike.
ALTER TABLE beliefs DROP COLUMN search_tsv;
ALTER TABLE beliefs ADD COLUMN search_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english', subject || ' ' || predicate || ' ' || object)) STORED;
CREATE INDEX beliefs_search ON beliefs USING gin (search_tsv);
