"""Measuring how long the event loop is held while some work runs."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from typing import AsyncIterator


class LoopLag:
    worst = 0.0


@contextlib.asynccontextmanager
async def watch_loop(period: float = 0.01) -> AsyncIterator[LoopLag]:
    """The worst delay a ``period`` ticker on this loop saw while the block ran.

    The cyclic garbage collector is paused meanwhile: its full collections stop every thread of
    a process with torch loaded for a few hundred milliseconds, wherever the work runs, and
    would hide what is measured here (work held on the loop or not)."""
    lag, done = LoopLag(), asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(period)
            lag.worst = max(lag.worst, time.perf_counter() - before - period)

    was_enabled = gc.isenabled()
    gc.disable()
    ticker = asyncio.create_task(tick())
    try:
        yield lag
    finally:
        done.set()
        await ticker
        if was_enabled:
            gc.enable()
