-- Who may act on what: a job records the author who started it (only they or an administrator
-- may stop, resume or interview it), and a remembered message records its author's id (so a
-- member can make the bot forget their own messages). '' where it is not known (older rows,
-- jobs the bot started itself): only administrators act on those.
ALTER TABLE jobs ADD COLUMN started_by TEXT NOT NULL DEFAULT '';
ALTER TABLE memory_messages ADD COLUMN author_id TEXT NOT NULL DEFAULT '';
CREATE INDEX memory_messages_author ON memory_messages(scope, author_id);
