-- PostgreSQL twin of migrations/0033_scope_search_stats.sql: PostgreSQL has kept each scope's
-- search statistics (memory_search_stats, search_len) since 0026; nothing to change.
SELECT 1;
