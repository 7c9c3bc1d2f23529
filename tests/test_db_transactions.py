"""Database.transaction under cancellation: a task cancelled while its BEGIN is queued on the
connection's thread must not leave the shared connection inside a transaction (every later
BEGIN, a job's progress write included, would fail)."""
from __future__ import annotations

import asyncio

from engine.db import open_database


async def test_a_transaction_cancelled_while_it_begins_leaves_the_connection_usable(tmp_path):
    db = await open_database(tmp_path / "x.sqlite3")
    try:
        async def write() -> None:
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO kv VALUES ('a')")

        await db.execute("CREATE TABLE kv (k TEXT)")
        task = asyncio.create_task(write())
        await asyncio.sleep(0)        # the task now waits for its BEGIN, queued on the connection's thread
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO kv VALUES ('b')")
        assert [r[0] for r in await db.fetchall("SELECT k FROM kv")] == ["b"]
    finally:
        await db.close()
