-- Keyword search ranks a scope by its own statistics on SQLite too, as PostgreSQL has since 0026
-- (engine/memory/keyword_sql.py). FTS5 keeps its counts for the whole table, all servers and
-- chats together, so a speaker's name in half of one chat's lines weighed as a rare word beside
-- nine other chats (LoCoMo, ten conversations in one database: 0.589 turn recall@5 against 0.614
-- with a database each, bench/RESULTS.md). memory_search_stats holds, per table and scope, the
-- rows and their tokens, kept by the triggers below; `search_len` counts a row's tokens, the
-- scope's included, as FTS5 counts its scope column and PostgreSQL's twin column does.
ALTER TABLE memory_messages ADD COLUMN search_len INTEGER GENERATED ALWAYS AS
    (CASE WHEN search_terms = '' THEN 1 ELSE 2 + length(search_terms) - length(replace(search_terms, ' ', '')) END)
    VIRTUAL;
ALTER TABLE beliefs ADD COLUMN search_len INTEGER GENERATED ALWAYS AS
    (CASE WHEN search_terms = '' THEN 1 ELSE 2 + length(search_terms) - length(replace(search_terms, ' ', '')) END)
    VIRTUAL;

CREATE TABLE memory_search_stats (
    tbl    TEXT NOT NULL,                -- 'memory_messages' or 'beliefs'
    scope  TEXT NOT NULL,
    docs   INTEGER NOT NULL DEFAULT 0,   -- rows
    tokens INTEGER NOT NULL DEFAULT 0,   -- their search_len, summed
    PRIMARY KEY (tbl, scope)
);
INSERT INTO memory_search_stats(tbl, scope, docs, tokens)
    SELECT 'memory_messages', scope, count(*), sum(search_len) FROM memory_messages GROUP BY scope;
INSERT INTO memory_search_stats(tbl, scope, docs, tokens)
    SELECT 'beliefs', scope, count(*), sum(search_len) FROM beliefs GROUP BY scope;

CREATE TRIGGER memory_messages_search_stats_ai AFTER INSERT ON memory_messages BEGIN
    INSERT INTO memory_search_stats(tbl, scope, docs, tokens) VALUES ('memory_messages', new.scope, 1, new.search_len)
        ON CONFLICT (tbl, scope) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
END;
CREATE TRIGGER memory_messages_search_stats_ad AFTER DELETE ON memory_messages BEGIN
    UPDATE memory_search_stats SET docs = docs - 1, tokens = tokens - old.search_len
        WHERE tbl = 'memory_messages' AND scope = old.scope;
END;
CREATE TRIGGER memory_messages_search_stats_au AFTER UPDATE OF scope, search_terms ON memory_messages BEGIN
    UPDATE memory_search_stats SET docs = docs - 1, tokens = tokens - old.search_len
        WHERE tbl = 'memory_messages' AND scope = old.scope;
    INSERT INTO memory_search_stats(tbl, scope, docs, tokens) VALUES ('memory_messages', new.scope, 1, new.search_len)
        ON CONFLICT (tbl, scope) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
END;
CREATE TRIGGER beliefs_search_stats_ai AFTER INSERT ON beliefs BEGIN
    INSERT INTO memory_search_stats(tbl, scope, docs, tokens) VALUES ('beliefs', new.scope, 1, new.search_len)
        ON CONFLICT (tbl, scope) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
END;
CREATE TRIGGER beliefs_search_stats_ad AFTER DELETE ON beliefs BEGIN
    UPDATE memory_search_stats SET docs = docs - 1, tokens = tokens - old.search_len
        WHERE tbl = 'beliefs' AND scope = old.scope;
END;
CREATE TRIGGER beliefs_search_stats_au AFTER UPDATE OF scope, search_terms ON beliefs BEGIN
    UPDATE memory_search_stats SET docs = docs - 1, tokens = tokens - old.search_len
        WHERE tbl = 'beliefs' AND scope = old.scope;
    INSERT INTO memory_search_stats(tbl, scope, docs, tokens) VALUES ('beliefs', new.scope, 1, new.search_len)
        ON CONFLICT (tbl, scope) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
END;
