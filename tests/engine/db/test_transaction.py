"""Database.transaction under cancellation: a task cancelled while its BEGIN is on the way
leaves the connection usable (the BEGIN still runs on aiosqlite's thread)."""
from __future__ import annotations

import asyncio

import pytest

from tests.helpers.llm_fixtures import db  # noqa: F401


async def test_a_transaction_cancelled_at_its_begin_leaves_none_open(db):  # noqa: F811
    await db.execute("CREATE TABLE t (x INTEGER)")
    started = asyncio.Event()

    async def write() -> None:
        started.set()
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO t VALUES (1)")

    task = asyncio.create_task(write())
    await started.wait()      # the task holds the lock and awaits its BEGIN
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with db.transaction() as conn:   # before the fix: "cannot start a transaction within a transaction"
        await conn.execute("INSERT INTO t VALUES (2)")
    assert [r[0] for r in await db.fetchall("SELECT x FROM t")] == [2]
    assert not db.conn.in_transaction
