"""The C allocator of a bot that runs for weeks: memory freed goes back to the system.

glibc's malloc keeps what Python, NumPy, ONNX Runtime and hnswlib free inside its arenas unless it
lies at the very top of one. Two of its defaults make a long-running process's resident memory
creep up although nothing leaks:
- its mmap threshold is dynamic: once a large block (a partition's vector matrix, an embedding
  batch) is freed, blocks up to that size come from the arenas from then on, and freed they stay
  there, in holes below whatever was allocated after them;
- free pages inside an arena are only handed back by ``malloc_trim``.
``configure`` fixes the threshold (blocks of ``MMAP_THRESHOLD`` or more are mapped on their own
and unmapped when freed); ``trim_every`` hands back free arena pages now and then, off the event
loop. On a C library without them (musl, macOS) both do nothing.
"""
from __future__ import annotations

import asyncio
import ctypes

M_MMAP_THRESHOLD = -3        # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD = 256 * 1024  # glibc's own default before it starts to move


def _glibc():
    try:
        libc = ctypes.CDLL(None)   # the C library this process already runs on
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_libc = _glibc()


def configure() -> bool:
    """Fix glibc's mmap threshold; whether it took."""
    return _libc is not None and _libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1


def trim() -> None:
    """Hand the free pages of every arena back to the system (milliseconds for a heap of 1 GB)."""
    if _libc is not None:
        _libc.malloc_trim(0)


async def trim_every(interval_s: float) -> None:
    """``trim`` every ``interval_s`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        await asyncio.to_thread(trim)
