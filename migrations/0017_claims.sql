-- Work that only one process may do at a time, whichever process it is (polling one Telegram
-- bot: the Bot API serves getUpdates to one consumer). The owner column names owners.id; a
-- claim whose owner is gone may be taken over.
CREATE TABLE claims (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    claimed_at TEXT NOT NULL
);
