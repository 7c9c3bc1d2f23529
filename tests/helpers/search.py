"""Shared by the keyword-search tests (tests/engine/memory/test_chattext.py, test_terms.py,
test_topics.py, test_keyword_sql.py, test_message_index.py): ``MONDAY`` (LoCoMo's first session,
the time the chats are said at), ``keyword_hits`` (what the keyword search alone ranks for a
question), ``Member`` (someone typing into the console at a chosen time), ``say_all``, the ``app``
fixture (a console app whose whole chat is one world, on either backend), ``seed_scope`` (rows of
one scope written straight into the tables) and ``vm_steps`` (what a piece of work costs SQLite)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from bot.app import App
from bot.neutral import Attachment, Incoming
from engine.config import parse_config
from engine.db import Database
from engine.db.sqlite import SqliteDatabase
from engine.memory.audience import Viewer
from engine.memory.keyword_sql import keyword_messages
from engine.memory.textutil import fts_query
from tests.helpers.chat import Collect

MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)  # LoCoMo's first session


async def keyword_hits(db: Database, question: str, now: datetime = MONDAY, scope: str = "console:test") -> list[str]:
    """The texts the keyword search alone ranks for a question, best first (BM25 on both)."""
    hits = await keyword_messages(db, Viewer.operator(scope), fts_query(question, now=now), 50)
    if not hits:
        return []
    texts = {r["id"]: r["text"] for r in await db.fetchall(
        f"SELECT id, text FROM memory_messages WHERE id IN ({','.join('?' * len(hits))})", [i for i, _ in hits])}
    return [texts[i] for i, _ in hits]


class Member:
    """Someone typing into the console channel of a running app, at a chosen time."""

    def __init__(self, app: App, name: str, admin: bool = False):
        self.app, self.name, self.admin, self.n = app, name, admin, 0

    async def say(self, text: str, ts: datetime = MONDAY, attachments: tuple[Attachment, ...] = ()) -> str:
        self.n += 1
        reply = Collect()
        await self.app.dispatch(Incoming("console", "console:test", "general", self.name, self.name, text,
                                         message_id=f"{self.name}-{self.n}", ts=ts, is_admin=self.admin,
                                         attachments=list(attachments)), reply)
        return "\n".join(reply.texts)


async def say_all(app: App, lines: list[tuple[str, str]]) -> None:
    """Each (author, text) said in order, each author a Member of their own."""
    members: dict[str, Member] = {}
    for author, text in lines:
        await members.setdefault(author, Member(app, author)).say(text)


@pytest.fixture
async def app(tmp_path, db_url):
    # One world holds the whole chat, so today's world-bound recall and scope-wide recall agree.
    config = parse_config({"bot": {"data_dir": str(tmp_path)}, "database": {"url": db_url},
                           "memory": {"base_threshold": -1.0}})
    app = await App.create(config, features=["bot.features.core", "bot.features.memory"])
    await app.start()
    yield app
    await app.close()


async def seed_scope(db: Database, scope: str, world: str, n: int, start: int) -> list[int]:
    """``n`` messages of ``scope`` in a new world, ids from ``start``, each searched by 'zebra
    stripe i' (their tokens written as they are); returns their ids."""
    await db.execute("INSERT INTO worlds(id, scope, centroid, created_at, last_active) VALUES (?, ?, ?, 'n', 'n')",
                     (world, scope, bytes(8)))
    rows = [(start + i, scope, world, "c", f"m{start + i}", "anna", "x", f"zebra stripe {i}", "n", bytes(8))
            for i in range(n)]
    async with db.transaction() as conn:
        await conn.executemany("INSERT INTO memory_messages(id, scope, world_id, channel, message_id, author, text, "
                               "search_terms, ts, embedding) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    return [r[0] for r in rows]


async def vm_steps(db: Database, work) -> int:
    """SQLite virtual-machine steps ``work`` (a coroutine on ``db``, an SQLite database) takes."""
    assert isinstance(db, SqliteDatabase), "virtual-machine steps are SQLite's"
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0
    await db.conn.set_progress_handler(count, 1)
    try:
        await work
    finally:
        await db.conn.set_progress_handler(None, 1)  # type: ignore[arg-type]  # None removes it (sqlite3)
    return steps
