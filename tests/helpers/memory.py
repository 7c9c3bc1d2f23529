"""Shared set-up for the memory tests: a real database (a SQLite file, or PostgreSQL through the
``db_url`` fixture of tests/conftest.py), a real embedder (loaded once per test process by the
embedder's own cache) and a memory engine over them; ``Chat`` and ``said`` make messages,
``add_belief`` stores a belief resting on given messages as extraction would.

``open_engine`` takes the English MiniLM unless told otherwise (``model=``): the routing tests were
written for its similarities and name their thresholds; the [memory] keys they leave unset take
that model's calibrated values, as a configuration file would."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from engine.config import MINILM_MODEL, MemorySection, calibrated
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage, beliefs as belief_store
from engine.memory.beliefs import NewBelief
from engine.memory.models import utcnow

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


async def open_engine(target: str | Path, llm=None, model: str = MINILM_MODEL, **settings):
    """A started engine on ``target``: a SQLite file path, ``sqlite:///path`` or ``postgresql://...``
    (opening it again later is a restart on the same data)."""
    db = await open_database(target)
    section = MemorySection(**{**calibrated(model)["memory"], **settings})
    engine = MemoryEngine(db, Embedder(model), section, llm=llm)
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


def said(chat: Chat, text: str, author: str, author_id: str, channel: str | None = None) -> MemoryMessage:
    message = chat.msg(text, author=author, channel=channel)
    message.author_id = author_id
    return message


async def add_belief(engine, db, scope: str, world_id: str, subject: str, obj: str, sources: list[int],
                     confidence=0.9) -> int:
    """A belief "<subject> said <obj>" in ``world_id`` resting on the messages ``sources``; its id."""
    fact = NewBelief(subject, "said", obj, confidence, False, sources, T0)
    async with db.transaction() as conn:
        await belief_store.apply(conn, scope, world_id, [fact], await engine.embedder.embed([fact.text()]), utcnow())
    return await db.fetchval("SELECT max(id) FROM beliefs")
