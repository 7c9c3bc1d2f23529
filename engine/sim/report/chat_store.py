"""What report chat keeps in the database (migration 0019_report_chat.sql).

- ``report_chat``: each question asked to a simulation's report agent in a channel, with its
  answer. ``recent`` gives the last few of a simulation in one channel, oldest first, for the
  next question's prompt: a channel's conversation with the report stays its own.
- ``report_messages``: the ids of the bot's messages that carry a report (its summary, charts and
  file) or an answer to a question about it, per scope, so a reply to one of them is a question
  to that simulation (``sim_of_message``). Message ids are the platform's: unique within a
  Discord server or a Telegram chat, hence the key (scope, message_id).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.db import Database
from engine.jobs import utcnow


@dataclass(frozen=True)
class Exchange:
    question: str
    answer: str


async def recent(db: Database, sim_id: str, scope: str, channel: str, limit: int) -> list[Exchange]:
    """The last ``limit`` questions and answers about ``sim_id`` in this channel, oldest first."""
    if limit <= 0:
        return []
    rows = await db.fetchall("SELECT question, answer FROM report_chat WHERE sim_id=? AND scope=? AND channel=?"
                             " ORDER BY id DESC LIMIT ?", (sim_id, scope, channel, limit))
    return [Exchange(r["question"], r["answer"]) for r in reversed(rows)]


async def record(db: Database, sim_id: str, scope: str, channel: str, asked_by: str, question: str,
                 answer: str, tool_calls: int, unverified: int) -> None:
    await db.execute("INSERT INTO report_chat(sim_id, scope, channel, asked_by, question, answer, tool_calls,"
                     " unverified, asked_at) VALUES (?,?,?,?,?,?,?,?,?)",
                     (sim_id, scope, channel, asked_by, question, answer, tool_calls, unverified, utcnow()))


async def forget(db: Database, scope: str, channel: str | None = None, asked_by: str | None = None,
                 question: str | None = None) -> int:
    """Delete the questions asked in ``scope`` (only in ``channel``, only by ``asked_by``, only
    those reading ``question``, when given) and their answers (/forget); returns how many went."""
    where, args = "scope=?", [scope]
    for column, value in (("channel", channel), ("asked_by", asked_by), ("question", question)):
        if value is not None:
            where, args = f"{where} AND {column}=?", [*args, value]
    async with db.transaction() as conn:
        async with conn.execute(f"SELECT count(*) FROM report_chat WHERE {where}", args) as cur:
            gone = (await cur.fetchone())[0]
        await conn.execute(f"DELETE FROM report_chat WHERE {where}", args)
    return gone


async def remember_messages(db: Database, scope: str, channel: str, sim_id: str, message_ids: list[str]) -> None:
    """Note the bot's messages about ``sim_id`` ('' ids, from platforms without replies, are left out)."""
    now = utcnow()
    await db.executemany("INSERT INTO report_messages(scope, message_id, sim_id, channel, posted_at)"
                         " VALUES (?,?,?,?,?) ON CONFLICT(scope, message_id) DO UPDATE SET sim_id=excluded.sim_id,"
                         " channel=excluded.channel, posted_at=excluded.posted_at",
                         [(scope, m, sim_id, channel, now) for m in message_ids if m])


async def sim_of_message(db: Database, scope: str, message_id: str) -> str | None:
    """The simulation whose report or report answer the bot posted as ``message_id``, or None."""
    if not message_id:
        return None
    return await db.fetchval("SELECT sim_id FROM report_messages WHERE scope=? AND message_id=?",
                             (scope, message_id))
