-- PostgreSQL twin of migrations/0026_search_terms.sql. The engine writes `search_terms` (the
-- row's tokens, engine/memory/terms.py); the tsvector is generated from them as they are, no
-- parser or dictionary in between, positions kept (the same tokens, counts and phrases FTS5
-- indexes), led by the row's scope as a lexeme of its own ('scope:<scope>', which no token can
-- be), so a query that asks for it reads only the scope's entries of the GIN index. `search_len`
-- counts the tokens (the scope's included, as FTS5 counts its scope column).
-- Ranking is BM25 as FTS5 computes it (engine/memory/keyword_sql.py), over each scope's own
-- statistics: memory_search_stats holds, per table and scope, the rows and their tokens
-- (what FTS5 keeps in its own shadow tables), kept by the triggers below.
CREATE FUNCTION search_tsv(scope TEXT, terms TEXT) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(lex, ' '), '')::tsvector FROM (
        SELECT '''' || replace(replace(t, '\', '\\'), '''', '''''') || ''':'
                    || string_agg(least(n, 16383)::text, ',' ORDER BY n) AS lex
        FROM (SELECT t, n, row_number() OVER (PARTITION BY t ORDER BY n) AS k
              FROM unnest(array_prepend('scope:' || scope, string_to_array(nullif(terms, ''), ' ')))
                   WITH ORDINALITY AS u(t, n)) x
        WHERE k <= 255 GROUP BY t) y
$$;

ALTER TABLE memory_messages ADD COLUMN search_terms TEXT NOT NULL DEFAULT '';
ALTER TABLE beliefs ADD COLUMN search_terms TEXT NOT NULL DEFAULT '';
INSERT INTO memory_messages_unfitted(id) SELECT id FROM memory_messages ON CONFLICT DO NOTHING;
CREATE TABLE beliefs_unfitted (id BIGINT PRIMARY KEY);
INSERT INTO beliefs_unfitted(id) SELECT id FROM beliefs;

ALTER TABLE memory_messages DROP COLUMN search_tsv;   -- its GIN index goes with it
ALTER TABLE memory_messages ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (search_tsv(scope, search_terms)) STORED;
ALTER TABLE memory_messages ADD COLUMN search_len integer
    GENERATED ALWAYS AS (1 + coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)) STORED;
CREATE INDEX memory_messages_search ON memory_messages USING gin (search_tsv);
ALTER TABLE beliefs DROP COLUMN search_tsv;
ALTER TABLE beliefs ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (search_tsv(scope, search_terms)) STORED;
ALTER TABLE beliefs ADD COLUMN search_len integer
    GENERATED ALWAYS AS (1 + coalesce(array_length(string_to_array(nullif(search_terms, ''), ' '), 1), 0)) STORED;
CREATE INDEX beliefs_search ON beliefs USING gin (search_tsv);

CREATE TABLE memory_search_stats (
    tbl    TEXT NOT NULL,              -- 'memory_messages' or 'beliefs'
    scope  TEXT NOT NULL,
    docs   BIGINT NOT NULL DEFAULT 0,  -- rows
    tokens BIGINT NOT NULL DEFAULT 0,  -- their search_len, summed
    PRIMARY KEY (tbl, scope)
);
INSERT INTO memory_search_stats(tbl, scope, docs, tokens)
    SELECT 'memory_messages', scope, count(*), sum(search_len) FROM memory_messages GROUP BY scope;
INSERT INTO memory_search_stats(tbl, scope, docs, tokens)
    SELECT 'beliefs', scope, count(*), sum(search_len) FROM beliefs GROUP BY scope;
CREATE FUNCTION memory_search_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE memory_search_stats SET docs = docs - 1, tokens = tokens - OLD.search_len
            WHERE tbl = TG_TABLE_NAME AND scope = OLD.scope;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO memory_search_stats(tbl, scope, docs, tokens) VALUES (TG_TABLE_NAME, NEW.scope, 1, NEW.search_len)
            ON CONFLICT (tbl, scope) DO UPDATE SET docs = memory_search_stats.docs + 1,
                                                   tokens = memory_search_stats.tokens + EXCLUDED.tokens;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_messages_search_stats AFTER INSERT OR DELETE OR UPDATE OF scope, search_terms
    ON memory_messages FOR EACH ROW EXECUTE FUNCTION memory_search_count();
CREATE TRIGGER beliefs_search_stats AFTER INSERT OR DELETE OR UPDATE OF scope, search_terms
    ON beliefs FOR EACH ROW EXECUTE FUNCTION memory_search_count();

-- The vector index of a scope catches up on the rows stored since it last looked
-- (engine/memory/message_index.py): a range of this index, where a range of ids also read every
-- other server's rows stored since (bench/scope_latency.py: 2 s a recall beside 300k of them).
CREATE INDEX memory_messages_scope ON memory_messages(scope, id);
CREATE INDEX beliefs_scope ON beliefs(scope, id);
