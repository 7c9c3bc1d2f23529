"""Shared set-up for the memory tests: a real database (a SQLite file, or PostgreSQL through the
``db_url`` fixture of tests/conftest.py), the real MiniLM embedder (loaded once per test process by
the embedder's own cache) and a memory engine over them."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from engine.config import MemorySection
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


async def open_engine(target: str | Path, llm=None, **settings):
    """A started engine on ``target``: a SQLite file path, ``sqlite:///path`` or ``postgresql://...``
    (opening it again later is a restart on the same data)."""
    db = await open_database(target)
    engine = MemoryEngine(db, Embedder(), MemorySection(**settings), llm=llm)
    await engine.start()
    return db, engine


async def close_engine(db, engine) -> None:
    await engine.close()
    await db.close()


class Chat:
    """Builds messages of one scope and channel with increasing ids and timestamps."""

    def __init__(self, scope: str = "test:1", channel: str = "general", step_s: float = 30.0):
        self.scope, self.channel, self.step_s = scope, channel, step_s
        self.n = 0

    def msg(self, text: str, author: str = "alice", channel: str | None = None) -> MemoryMessage:
        self.n += 1
        return MemoryMessage(self.scope, channel or self.channel, f"{self.scope}-{self.n}", author, text,
                             T0 + timedelta(seconds=self.n * self.step_s))
