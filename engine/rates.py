"""Per-person rate limits on cost-bearing commands, shared by every bot process on the database.

A person (engine.trust ``user_key``) may use at most ``per_hour`` cost-bearing commands in any
rolling hour (``[bot] costly_per_hour``; 0: no limit). Each use is a row of ``costly_uses``,
written in the same write transaction that counts the hour's earlier ones (write transactions
never interleave, engine.db), so two processes cannot both let the last one through. Rows older
than the window go as new ones come.
"""
from __future__ import annotations

import time

from engine.db import Database

WINDOW_S = 3600.0


class CostlyRate:
    def __init__(self, db: Database, per_hour: int):
        self.db = db
        self.per_hour = per_hour

    async def take(self, user: str, command: str) -> float | None:
        """Count one use by ``user``: None when it is allowed, else the seconds until the next one
        is (and nothing is counted)."""
        if not self.per_hour or not user:
            return None
        now = time.time()
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM costly_uses WHERE at <= ?", (now - WINDOW_S,))
            async with conn.execute("SELECT at FROM costly_uses WHERE spender = ? ORDER BY at", (user,)) as cur:
                used = [row[0] for row in await cur.fetchall()]
            if len(used) >= self.per_hour:
                return max(1.0, used[len(used) - self.per_hour] + WINDOW_S - now)
            await conn.execute("INSERT INTO costly_uses(spender, command, at) VALUES (?,?,?)", (user, command, now))
        return None
