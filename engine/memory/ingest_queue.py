"""The bounded, micro-batching queue in front of ``MemoryEngine.ingest_many``.

Chat messages arrive one at a time, but embedding and storing them one at a time is slow
(one model call and one transaction per message). Producers ``put`` messages here; one worker
takes everything waiting (up to ``batch_max`` messages, or what arrived within ``batch_wait_ms``
of the first one) and ingests it as one batch: one embedding call, one transaction. The
embedding runs off the event loop (``Embedder.embed``), so commands are answered meanwhile.

Backpressure: at most ``max_pending`` messages wait; ``put`` on a full queue waits for room, so
a producer that can hold its input back (Telegram polling) simply fetches later and nothing is
dropped. The queue is first in, first out, so a channel's messages are stored in the order
they were put; ``settled(scope, channel)`` returns once every message of that channel put
before the call is stored (a command waits for it, so it sees all earlier messages), and
``settled()`` once every message put before the call is.

A batch that fails is retried once, then message by message; a message that still fails alone
is logged and skipped, so one bad message never wedges the queue.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from engine.memory.models import MemoryMessage

log = logging.getLogger(__name__)


class IngestQueue:
    def __init__(self, engine, max_pending: int = 2000, batch_max: int = 256, batch_wait_ms: float = 20.0):
        self.engine = engine  # MemoryEngine, or anything with ``async ingest_many(list)``
        self.max_pending = max_pending
        self.batch_max = batch_max
        self.batch_wait_s = batch_wait_ms / 1000.0
        self._waiting: deque[tuple[int, MemoryMessage]] = deque()
        self._put_seq = 0           # sequence number of the last message put
        self._done_seq = 0          # every message up to this one has been handled
        self._last_of: dict[tuple[str, str], int] = {}  # (scope, channel) -> seq of its last message put
        self._changed = asyncio.Condition()
        self._worker: asyncio.Task | None = None
        self.batches = 0            # batches ingested (for logs and benchmarks)

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
            self._put_seq += 1
            self._waiting.append((self._put_seq, message))
            self._last_of[(message.scope, message.channel)] = self._put_seq
            self._changed.notify_all()

    async def settled(self, scope: str | None = None, channel: str | None = None) -> None:
        """Return once the messages put before this call (of ``scope``/``channel`` when given) are stored."""
        target = self._put_seq if scope is None else self._last_of.get((scope, channel or ""), 0)
        if self._done_seq >= target:
            return
        async with self._changed:
            await self._changed.wait_for(lambda: self._done_seq >= target)

    async def _run(self) -> None:
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: bool(self._waiting))
            deadline = time.monotonic() + self.batch_wait_s
            while len(self._waiting) < self.batch_max:  # let a burst gather into one batch
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                async with self._changed:
                    try:
                        await asyncio.wait_for(self._changed.wait(), left)
                    except asyncio.TimeoutError:
                        break
            batch = [self._waiting.popleft() for _ in range(min(self.batch_max, len(self._waiting)))]
            async with self._changed:
                self._changed.notify_all()  # room for producers while this batch is stored
            await self._ingest([m for _, m in batch])
            self.batches += 1
            async with self._changed:
                self._done_seq = batch[-1][0]
                for key in [k for k, seq in self._last_of.items() if seq <= self._done_seq]:
                    del self._last_of[key]
                self._changed.notify_all()

    async def _ingest(self, messages: list[MemoryMessage]) -> None:
        for attempt in range(2):
            try:
                await self.engine.ingest_many(messages)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("memory: a batch of %d messages failed (attempt %d)", len(messages), attempt + 1,
                            exc_info=True)
        for message in messages:  # find the culprit: store the others one by one
            try:
                await self.engine.ingest_many([message])
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("memory: message %s of %s/%s could not be stored; skipped",
                              message.message_id, message.scope, message.channel)
