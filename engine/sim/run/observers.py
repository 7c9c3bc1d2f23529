"""What the bot process does with each completed round of a run: the round observers.

A ``RoundObserver`` is called once a platform's round has ended and its checkpoint is written,
with a ``RoundDone`` naming the simulation, its folder, the platform and the round (numbered
from 1, as users see it). Observers read what they need from the round's files (the platform's
``actions.jsonl`` and database) and keep their results in our storage: belief tracking and the
simulation's memory scope are observers.

Contract:
- Calls come in round order per run, one at a time, off the path that reads the child's events
  (a slow observer never stalls the run); the run's step ends only after every call returned.
- An observer must be idempotent: when a run resumes, it is called again for every round
  completed so far, and keeps what it already holds (a round whose observation a crash cut short
  is caught up this way).
- An exception is logged and does not fail the run; a ``BudgetExceeded`` is the observer's to
  handle (skip the round, say so in its results).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoundDone:
    sim_id: str
    folder: Path
    platform: str
    round: int                 # 1-based: the round just completed
    job_id: str | None = None  # the job the run's LLM usage counts for
    scope: str | None = None   # the chat scope the simulation belongs to


RoundObserver = Callable[[RoundDone], Awaitable[None]]


class RoundFeed:
    """One run's queue of completed rounds, served to the observers by one task."""

    def __init__(self, observers: list[RoundObserver]):
        self.observers = observers
        self.queue: asyncio.Queue[RoundDone] = asyncio.Queue()
        self.task = asyncio.create_task(self._serve(), name="sim-round-observers") if observers else None

    def put(self, done: RoundDone) -> None:
        if self.task is not None:
            self.queue.put_nowait(done)

    async def _serve(self) -> None:
        while True:
            done = await self.queue.get()
            try:
                for observer in self.observers:
                    try:
                        await observer(done)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("round observer %s failed on %s %s round %d",
                                      getattr(observer, "__qualname__", observer), done.sim_id, done.platform,
                                      done.round)
            finally:
                self.queue.task_done()

    async def drain(self) -> None:
        """Wait until every queued round was observed, then end the serving task."""
        if self.task is None:
            return
        await self.queue.join()
        self.task.cancel()

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
