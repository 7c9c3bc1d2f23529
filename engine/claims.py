"""Work only one process may do at a time: a named claim held by a process owner.

Polling a Telegram bot is such work (the Bot API answers a second getUpdates consumer with 409
Conflict and the two steal each other's updates). A process ``claim``s the name before it does
the work and ``release``s it when it stops; while another live process holds it, ``claim``
says which one. A claim whose owner is gone (engine.owners: its lease expired or, on this
host, its pid ended) is taken over, with a compare-and-set on the old owner so two processes
taking over at once cannot both win.
"""
from __future__ import annotations

from engine.db import Database
from engine.jobs import utcnow
from engine.owners import ProcessOwner


async def claim(db: Database, owner: ProcessOwner, name: str) -> str | None:
    """Take ``name`` for ``owner``'s process: None once it holds it, otherwise who does
    ('another bot process (pid 12 on host h)')."""
    await db.execute("INSERT INTO claims(name, owner, claimed_at) VALUES (?,?,?) ON CONFLICT(name) DO NOTHING",
                     (name, owner.id, utcnow()))
    holder = await db.fetchval("SELECT owner FROM claims WHERE name = ?", (name,))
    if holder != owner.id and await owner.gone(holder):
        await db.execute("UPDATE claims SET owner = ?, claimed_at = ? WHERE name = ? AND owner = ?",
                         (owner.id, utcnow(), name, holder))
        holder = await db.fetchval("SELECT owner FROM claims WHERE name = ?", (name,))
    return None if holder == owner.id else await owner.describe(holder)


async def release(db: Database, owner: ProcessOwner, name: str) -> None:
    """Let go of ``name`` if ``owner``'s process holds it."""
    await db.execute("DELETE FROM claims WHERE name = ? AND owner = ?", (name, owner.id))
