"""Two bot processes storing chat messages in one database at the same time (each its own
connection, memory engine and ingest queue): every channel's messages are stored, and read
back, in the order they were sent, on both backends.

A channel is served by one process at a time (its Discord shard, the one Telegram poller); when
it moves to another process, that process takes its messages after the first one stored what
it had (``settled``). Stored order is ``memory_messages.id`` order, which memory reads by."""
from __future__ import annotations

import asyncio

import pytest

from engine.memory.ingest_queue import IngestQueue
from tests.helpers.memory import Chat, close_engine, open_engine

pytestmark = pytest.mark.timeout(120)
PER_CHANNEL = 12


async def test_two_processes_storing_at_once_keep_each_channels_order(db_url):
    (db_a, engine_a), (db_b, engine_b) = await open_engine(db_url), await open_engine(db_url)
    queue_a, queue_b = (IngestQueue(engine, batch_max=4, batch_wait_ms=0) for engine in (engine_a, engine_b))
    for queue in (queue_a, queue_b):
        queue.start()
    on_a, on_b, moving = Chat("test:a", "on-a"), Chat("test:b", "on-b"), Chat("test:m", "moving")
    sent: dict[str, list[str]] = {"on-a": [], "on-b": [], "moving": []}

    async def send(queue: IngestQueue, chat: Chat, i: int) -> None:
        message = chat.msg(f"message {i} of {chat.channel}: the ferry timetable changes on {i % 7 + 1} may")
        sent[chat.channel].append(message.message_id)
        await queue.put(message)

    async def served_by(queue: IngestQueue, chat: Chat) -> None:
        for i in range(PER_CHANNEL):
            await send(queue, chat, i)

    async def moved_each_message() -> None:
        for i in range(PER_CHANNEL):
            queue = (queue_a, queue_b)[i % 2]
            await send(queue, moving, i)
            await queue.settled(moving.scope, moving.channel)  # stored before the other process takes over

    try:
        await asyncio.gather(served_by(queue_a, on_a), served_by(queue_b, on_b), moved_each_message())
        await asyncio.gather(queue_a.settled(), queue_b.settled())
        rows = await db_a.fetchall("SELECT channel, message_id FROM memory_messages ORDER BY id")
        stored = {channel: [r["message_id"] for r in rows if r["channel"] == channel] for channel in sent}
        assert stored == sent
        assert {r["channel"] for r in rows} == set(sent) and len(rows) == 3 * PER_CHANNEL
    finally:
        for queue in (queue_a, queue_b):
            await queue.close()
        await close_engine(db_a, engine_a)
        await close_engine(db_b, engine_b)
