-- A counter per scope, raised by every change to its worlds, their messages' placement and
-- their beliefs, whichever process makes it. A running bot keeps each scope's worlds in memory;
-- when another process (an import or merge from the command line) has written to the
-- database, the bot compares these counters to find the scopes it must reload.
CREATE TABLE memory_scope_stamps (
    scope TEXT PRIMARY KEY,
    stamp INTEGER NOT NULL DEFAULT 0
);
CREATE TRIGGER worlds_stamp_ai AFTER INSERT ON worlds BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (new.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER worlds_stamp_au AFTER UPDATE ON worlds BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (new.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER worlds_stamp_ad AFTER DELETE ON worlds BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (old.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER memory_messages_stamp_ai AFTER INSERT ON memory_messages BEGIN
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
CREATE TRIGGER beliefs_stamp_ai AFTER INSERT ON beliefs BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (new.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER beliefs_stamp_au AFTER UPDATE ON beliefs BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (new.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
CREATE TRIGGER beliefs_stamp_ad AFTER DELETE ON beliefs BEGIN
    INSERT INTO memory_scope_stamps(scope, stamp) VALUES (old.scope, 1)
        ON CONFLICT(scope) DO UPDATE SET stamp = stamp + 1;
END;
