-- PostgreSQL twin of migrations/0007_memory_stamps.sql: the same counter per scope, raised by
-- row triggers of the same names (one plpgsql function serves them all).
CREATE TABLE memory_scope_stamps (
    scope TEXT PRIMARY KEY,
    stamp BIGINT NOT NULL DEFAULT 0
);
CREATE FUNCTION memory_scope_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed := OLD.scope;
    ELSE
        changed := NEW.scope;
    END IF;
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (changed, 1)
        ON CONFLICT (scope) DO UPDATE SET stamp = memory_scope_stamps.stamp + 1;
    -- other bot processes cache scopes (engine/memory/scope_cache.py): tell them, as 0001's
    -- worldbot_notify_change does for channel settings (identical notices of one transaction
    -- are delivered once)
    PERFORM pg_notify('worldbot_changes', pg_backend_pid()::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER worlds_stamp_ai AFTER INSERT ON worlds FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER worlds_stamp_au AFTER UPDATE ON worlds FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER worlds_stamp_ad AFTER DELETE ON worlds FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER memory_messages_stamp_ai AFTER INSERT ON memory_messages
    FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER memory_messages_stamp_au AFTER UPDATE OF world_id ON memory_messages
    FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER memory_messages_stamp_ad AFTER DELETE ON memory_messages
    FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER beliefs_stamp_ai AFTER INSERT ON beliefs FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER beliefs_stamp_au AFTER UPDATE ON beliefs FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
CREATE TRIGGER beliefs_stamp_ad AFTER DELETE ON beliefs FOR EACH ROW EXECUTE FUNCTION memory_scope_stamp();
