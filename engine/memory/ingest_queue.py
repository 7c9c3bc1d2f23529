"""The bounded, micro-batching queue in front of ``MemoryEngine.store``.

Chat messages arrive one at a time, but storing them one at a time is slow (one transaction per
message). Producers ``put`` messages here; one worker takes everything waiting (up to
``batch_max`` messages, or what arrived within ``batch_wait_ms`` of the first one) and stores it
as one batch in one transaction: searchable by its words at once, within its channel's
audience. Embedding and routing to a world follow in the engine's embedding worker
(engine.memory.pending), so a backlog of embedding never delays a store nor a command.

Backpressure: at most ``max_pending`` messages wait; ``put`` on a full queue waits for room, so
a producer that can hold its input back (Telegram polling) simply fetches later and nothing is
dropped. Each channel's messages are stored in the order they were put.
``settled(scope, channel)`` returns once every message of that channel put before the call is
stored, not yet embedded (a command waits for it, so it sees all earlier messages; that channel's messages go
first meanwhile), and ``settled()`` once every message put before the call is.

A batch that fails is retried once, then message by message; a message that still fails alone
is logged and skipped, so one bad message never wedges the queue. A failure that says the
database cannot be reached (a PostgreSQL restart: ``Database.unreachable``) is no bad message:
the batch waits for the database (``Database.outlasting``), and nothing is skipped; producers
meanwhile wait for room as above.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Awaitable, Callable, TypeVar

from engine.memory.models import MemoryMessage

log = logging.getLogger(__name__)


Key = tuple[str, str]   # (scope, channel)
T = TypeVar("T")


async def batch_then_alone(items: list[T], handle: Callable[[list[T]], Awaitable[object]], what: str,
                           failed_alone: Callable[[T], Awaitable[object]]) -> None:
    """``handle(items)``, tried twice; if it still fails, each item alone, so that one bad item
    never holds up the others: an item that fails alone goes to ``failed_alone`` (called inside the
    ``except``, so it can log the traceback). ``what`` names the batch in the log ("a batch")."""
    for attempt in range(2):
        try:
            await handle(items)
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("memory: %s of %d messages failed (attempt %d)", what, len(items), attempt + 1,
                        exc_info=True)
    for item in items:  # find the culprit: handle the others one by one
        try:
            await handle([item])
        except asyncio.CancelledError:
            raise
        except Exception:
            await failed_alone(item)


class IngestQueue:
    def __init__(self, engine, max_pending: int = 2000, batch_max: int = 64, batch_wait_ms: float = 20.0):
        self.engine = engine  # MemoryEngine: its ``store`` and its ``db``
        self.max_pending = max_pending
        self.batch_max = batch_max
        self.batch_wait_s = batch_wait_ms / 1000.0
        self._waiting: deque[MemoryMessage] = deque()
        self._put: dict[Key, int] = {}      # messages put, per channel
        self._done: dict[Key, int] = {}     # of those, handled (stored, or skipped after failing)
        self._urgent: dict[Key, int] = {}   # channels a command waits for -> how many wait
        self._changed = asyncio.Condition()
        self._worker: asyncio.Task | None = None
        self.batches = 0                    # batches ingested (for logs and benchmarks)

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="memory-ingest")

    async def close(self) -> None:
        """Store what is still waiting, then stop the worker."""
        if self._worker is None:
            return
        try:
            await self.settled()
        finally:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None

    @property
    def pending(self) -> int:
        return len(self._waiting)

    async def put(self, message: MemoryMessage) -> None:
        """Queue one message; waits while ``max_pending`` messages are already waiting."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._waiting) < self.max_pending)
            key = (message.scope, message.channel)
            self._waiting.append(message)
            self._put[key] = self._put.get(key, 0) + 1
            self._changed.notify_all()

    async def settled(self, scope: str | None = None, channel: str | None = None) -> None:
        """Return once the messages put before this call (of ``scope``/``channel`` when given) are
        stored. A channel waited for goes first in the next batch, so a command in a busy channel
        waits for that channel's messages only, not for every chat's backlog."""
        keys = list(self._put) if scope is None else [(scope, channel or "")]
        targets = {k: self._put.get(k, 0) for k in keys if self._done.get(k, 0) < self._put.get(k, 0)}
        if not targets:
            return
        urgent = scope is not None
        if urgent:
            for key in targets:
                self._urgent[key] = self._urgent.get(key, 0) + 1
        try:
            async with self._changed:
                await self._changed.wait_for(lambda: all(self._done.get(k, 0) >= n for k, n in targets.items()))
        finally:
            if urgent:
                for key in targets:
                    self._urgent[key] -= 1
                    if not self._urgent[key]:
                        del self._urgent[key]

    def _take(self) -> list[MemoryMessage]:
        """The next batch: the waiting messages of the channels a command waits for, alone (a
        smaller batch is stored sooner); otherwise the oldest. Each channel keeps its order."""
        batch: list[MemoryMessage] = []
        if self._urgent:
            rest: deque[MemoryMessage] = deque()
            for message in self._waiting:
                if len(batch) < self.batch_max and (message.scope, message.channel) in self._urgent:
                    batch.append(message)
                else:
                    rest.append(message)
            self._waiting = rest
        if not batch:
            while self._waiting and len(batch) < self.batch_max:
                batch.append(self._waiting.popleft())
        return batch

    async def _run(self) -> None:
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: bool(self._waiting))
            deadline = time.monotonic() + self.batch_wait_s
            while len(self._waiting) < self.batch_max and not self._urgent:  # let a burst gather
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                async with self._changed:
                    try:
                        await asyncio.wait_for(self._changed.wait(), left)
                    except asyncio.TimeoutError:
                        break
            async with self._changed:
                batch = self._take()
                self._changed.notify_all()  # room for producers while this batch is stored
            await self._ingest(batch)
            self.batches += 1
            async with self._changed:
                for message in batch:
                    key = (message.scope, message.channel)
                    self._done[key] = self._done.get(key, 0) + 1
                self._changed.notify_all()

    async def _ingest(self, messages: list[MemoryMessage]) -> None:
        async def skipped(message: MemoryMessage) -> None:
            log.exception("memory: message %s of %s/%s could not be stored; skipped",
                          message.message_id, message.scope, message.channel)
        await batch_then_alone(messages, self._store, "a batch", skipped)

    async def _store(self, messages: list[MemoryMessage]) -> None:
        """``store``, waiting out a database that cannot be reached; any other failure raises."""
        await self.engine.db.outlasting(lambda: self.engine.store(messages),
                                        f"memory: {len(messages)} messages")
