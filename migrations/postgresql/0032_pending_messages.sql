-- PostgreSQL twin of migrations/0032_pending_messages.sql: pending rows (no world, no vector yet),
-- the audience they are read under and the process that claims them for embedding.
ALTER TABLE memory_messages ALTER COLUMN world_id DROP NOT NULL;
ALTER TABLE memory_messages ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE memory_messages ADD COLUMN audience TEXT;
ALTER TABLE memory_messages ADD COLUMN claimed_by TEXT;
CREATE INDEX memory_messages_unrouted ON memory_messages(scope, id) WHERE world_id IS NULL;
-- A pending row changes no world: only its routing (UPDATE OF world_id) moves the scope's stamp
-- (and tells the other processes).
DROP TRIGGER memory_messages_stamp_ai ON memory_messages;
CREATE TRIGGER memory_messages_stamp_ai AFTER INSERT ON memory_messages
    FOR EACH ROW WHEN (NEW.world_id IS NOT NULL) EXECUTE FUNCTION memory_scope_stamp();
