-- At most once: the command of a Telegram update is marked 'started' before it does anything and
-- 'done' when it ended (NULL: none began), so an update handed over again after a restart runs
-- no command twice (bot/once.py).
ALTER TABLE telegram_inbox ADD COLUMN command TEXT;
