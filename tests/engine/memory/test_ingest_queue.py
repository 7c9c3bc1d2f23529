"""Memory's ingest queue while the database is away: messages wait for it and are stored once it
is back, in order; only a message that fails on a reachable database is skipped."""
from __future__ import annotations

import asyncio

import pytest

from engine.memory.ingest_queue import IngestQueue
from tests.helpers.memory import Chat, close_engine, open_engine
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(180)


async def test_messages_put_while_postgresql_restarts_are_stored_once_it_is_back(restartable_pg):  # noqa: F811
    db, engine = await open_engine(await restartable_pg.fresh_database())
    queue = IngestQueue(engine, batch_max=4, batch_wait_ms=0)
    queue.start()
    chat = Chat()
    messages = [chat.msg(f"message {i} about the night ferry to the islands") for i in range(8)]
    try:
        for m in messages[:3]:
            await queue.put(m)
        await queue.settled()
        restarting = await restartable_pg.going_down(3.0)
        for m in messages[3:]:
            await queue.put(m)
        await restarting
        await asyncio.wait_for(queue.settled(), 60)
        assert [r["message_id"] for r in await db.fetchall("SELECT message_id FROM memory_messages ORDER BY id")] \
            == [m.message_id for m in messages]
    finally:
        await queue.close()
        await close_engine(db, engine)
