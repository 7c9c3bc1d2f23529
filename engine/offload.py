"""Run CPU-bound work (embedding, PDF parsing, index rebuilds) off the event loop."""
from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

# ONNX Runtime, torch, numpy, hnswlib and pypdf's zlib release the GIL for their heavy parts; a small
# shared pool keeps the loop responsive without oversubscribing a 2-core machine.
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cpu")


async def run_cpu(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in the pool, in a copy of the caller's context (its language: a
    chart drawn there is labelled in the chat's, engine.i18n)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return await loop.run_in_executor(_pool, functools.partial(context.run, fn, *args, **kwargs))
