"""Store first, embed later: the worker that gives stored chat messages their vector and world.

A chat message is stored the moment it arrives (``MemoryEngine.store``, migration 0032): a durable
row with its words indexed for keyword search and the audience it is read under, but no vector
and no world yet (*pending*). Embedding is what costs (the multilingual model does 10-70
messages/s on two cores), so it no longer stands between a message and a command that wants to
find it: the command waits for the write only (the ingest queue's ``settled``); recall finds a
pending message through its words, its vector follows.

This worker takes pending rows in batches, oldest first, embeds them off the event loop
(``Embedder.embed``), routes them to worlds and fills in vector and world (``route``: the
engine's ``_route_pending``). Everything that needs a world (digests, /worlds, belief
extraction, the vector index of recall) reads routed rows only and picks a message up once it
is routed.

Several processes may share one database. A process claims the rows it embeds
(``memory_messages.claimed_by``: its owners.id, engine.owners), with a compare-and-set, so no
row is ever embedded by two; a scope where another live process holds claims is left to it, so a
channel's messages are routed in order. Claims of a process that is gone (killed: its pid ended or
its lease ran out) are taken over; a process that stops cleanly first keeps embedding for up to
``[memory] close_embed_s``, then releases its claims. What was still pending is picked up by the
next start. A batch that fails is tried again once, then
message by message; one that still fails alone is removed and logged, so one bad message never
wedges the rest. A database that cannot be reached is waited for (``Database.outlasting``).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Awaitable, Callable

from engine.db import Database
from engine.memory import records
from engine.memory.ingest_queue import batch_then_alone
from engine.memory.models import MemoryMessage
from engine.owners import ProcessOwner

log = logging.getLogger(__name__)

POLL_S = 2.0     # an idle worker looks this often for rows other processes stored or left behind

Claimed = list[tuple[int, MemoryMessage]]    # (row id, message)


class PendingWorker:
    def __init__(self, db: Database, owner: ProcessOwner, route: Callable[[Claimed], Awaitable[None]],
                 batch_max: int = 64):
        self.db = db
        self.owner = owner
        self.route = route
        self.batch_max = batch_max
        self._wake = asyncio.Event()
        self._turn = asyncio.Lock()       # one batch at a time in this process (the worker or ``drain``)
        self._task: asyncio.Task | None = None
        self._progress = asyncio.Condition()   # told after each batch routed
        self.batches = 0                  # batches routed (for logs and benchmarks)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="memory-embed")

    async def close(self, finish_s: float = 0.0) -> None:
        """Stop, embedding what waits for up to ``finish_s`` first (a clean stop leaves little or
        nothing for the next start); what this process claimed and did not route is released for
        others (or the next start)."""
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        if finish_s > 0:
            try:
                await asyncio.wait_for(self.drain(), finish_s)
            except asyncio.TimeoutError:
                log.info("memory: stopping with messages still waiting for their vector; the next start embeds them")
            except Exception:
                log.warning("memory: embedding the last messages before stopping failed", exc_info=True)
        with contextlib.suppress(Exception):
            await records.release_claims(self.db, self.owner.id)

    def wake(self) -> None:
        """New rows were stored: look now rather than at the next poll."""
        self._wake.set()

    async def drain(self) -> None:
        """Route every pending row this process can claim, now."""
        while await self.step():
            pass

    async def step(self) -> int:
        """Claim one batch and route it; how many rows were claimed (0: nothing left to claim)."""
        async with self._turn:
            claimed = await self.db.outlasting(
                lambda: records.claim_pending(self.db, self.owner.id, self.owner.gone, self.batch_max),
                "memory: claiming messages to embed")
            if claimed:
                await self._route(claimed)
                self.batches += 1
                async with self._progress:
                    self._progress.notify_all()
            return len(claimed)

    async def routed(self, scope: str, wait_s: float) -> None:
        """Return once the messages of ``scope`` stored before the call have their world, or after
        ``wait_s``. Not until none waits: in a busy chat some always do."""
        deadline = time.monotonic() + wait_s
        mark = await records.newest_row(self.db, scope)
        while (left := deadline - time.monotonic()) > 0 and await records.pending_up_to(self.db, scope, mark):
            self.wake()
            async with self._progress:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._progress.wait(), min(left, POLL_S))

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                done = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("memory: embedding pending messages failed; trying again shortly")
                done = 0
            if not done:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), POLL_S)

    async def _route(self, claimed: Claimed) -> None:
        async def removed(one: tuple[int, MemoryMessage]) -> None:
            row, m = one
            log.exception("memory: message %s of %s/%s could not be embedded or routed; removed",
                          m.message_id, m.scope, m.channel)
            await records.drop_pending(self.db, row)
        await batch_then_alone(claimed, self._outlasting, "embedding a batch", removed)

    async def _outlasting(self, claimed: Claimed) -> None:
        await self.db.outlasting(lambda: self.route(claimed), f"memory: embedding {len(claimed)} messages")
