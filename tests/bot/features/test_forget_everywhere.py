"""/forget me, /forget message and /forget belief leave no trace of what was said: not in
messages, beliefs, topic names, the merge history, the search indexes nor report chat. Checked by
reading every row of every table, full-text shadow tables included, on both backends (the words
are in them before)."""
from __future__ import annotations

import pytest

from bot.neutral import Incoming
from engine.memory import beliefs as belief_store
from engine.memory.beliefs import NewBelief
from engine.memory.models import utcnow
from engine.sim.report import chat_store
from tests.helpers.chat import Outlet, RecordingReply, make_app

pytestmark = pytest.mark.timeout(120)
SCOPE, CHANNEL = "telegram:5", "5"
ALICE, BOB = "alice-1", "bob-2"
GONE, KEPT = "zorblax", "quibbleton"   # words only Alice says, only Bob says
INFERRED = "vextrel"                   # a word only in a belief


async def tables_holding(db, word: str) -> set[str]:
    """The tables any row of which holds ``word`` (in any column, as text or bytes)."""
    found = set()
    if db.dialect == "sqlite":
        names = [r[0] for r in await db.fetchall("SELECT name FROM sqlite_master WHERE type='table'")]
        for name in names:
            for row in await db.fetchall(f'SELECT * FROM "{name}"'):
                for value in row:
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    if word in text.lower():
                        found.add(name)
    else:
        names = [r[0] for r in await db.fetchall(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='public'")]
        for name in names:
            if await db.fetchval(f'SELECT count(*) FROM "{name}" t WHERE lower(t::text) LIKE ?', (f"%{word}%",)):
                found.add(name)
    return found


async def test_forget_me_leaves_no_trace_of_what_was_said(tmp_path, db_url):
    # every message its own world, named after it; merges record the names they absorb
    app = await make_app(tmp_path, db_url, memory={"base_threshold": 0.99, "merge_threshold": -1.0})
    app.adapters.add(Outlet("telegram", lambda scope, channel: RecordingReply()))
    await app.start()
    memory = app.memory

    async def say(author: str, text: str) -> str:
        reply = RecordingReply()
        await app.dispatch(Incoming("telegram", SCOPE, CHANNEL, author, author.split("-")[0], text,
                                    message_id=str(len(text) * 1000 + hash(text) % 997)), reply)
        await app.settled()
        return reply.sent()

    try:
        await say(ALICE, f"{GONE} harbour ferries stop on monday")
        await say(BOB, f"{KEPT} bakery opens early on sundays")
        await say(ALICE, f"the {GONE} strike moves to the docks")
        await memory.embedded()     # each in its world (stored first, routed after)
        await memory.merge(SCOPE)   # one world now; the others' names went into the merge history
        await say(ALICE, f"{GONE} pickets gather at the north gate")
        await say(BOB, f"{KEPT} bread prices rise again")
        await say(ALICE, f"tram drivers join the {GONE} walkout")
        await app.db.execute("INSERT INTO simulations(id, scope, channel, requirement, folder, created_at)"
                             " VALUES ('s1', ?, ?, 'what next?', ?, '2026-01-01')", (SCOPE, CHANNEL, str(tmp_path)))
        for who, word in (("telegram:" + ALICE, GONE), ("telegram:" + BOB, KEPT)):
            await chat_store.record(app.db, "s1", SCOPE, CHANNEL, who, f"what about {word}?", f"{word} answer", 1, 0)
        before = await tables_holding(app.db, GONE)
        assert {"memory_messages", "worlds", "world_merges", "report_chat"} <= before, before

        assert "your questions to report agents" in await say(ALICE, "/forget me")
        done = await say(ALICE, "/forget confirm")
        assert done.startswith("Forgot your messages here: 4 messages, 0 beliefs,")
        assert "Also removed: 1 question to report agents, with its answer." in done

        assert await tables_holding(app.db, GONE) == set()
        await memory.flush()   # the worlds that lost messages are named properly again: still nothing
        assert await tables_holding(app.db, GONE) == set()
        assert {"memory_messages", "report_chat"} <= await tables_holding(app.db, KEPT)   # Bob's stay
        assert [w.topic for w in await memory.worlds(SCOPE)] and all(
            GONE not in w.topic.lower() for w in await memory.worlds(SCOPE))
    finally:
        await app.close()


class Alone(RecordingReply):
    """A chat where what is meant for the asker alone is shown to them (as in a direct message)."""

    def privately(self) -> RecordingReply:
        return self


async def test_forgetting_one_message_or_one_belief_leaves_no_trace_either(tmp_path, db_url):
    """The same cleanup for one message (and the question it asked a report agent) and for one
    belief: the worlds they touched are named after what is left, the merge history loses its
    names, the search indexes their words; Alice's other question and Bob's messages stay."""
    app = await make_app(tmp_path, db_url, memory={"base_threshold": 0.99, "merge_threshold": -1.0})
    app.adapters.add(Outlet("telegram", lambda scope, channel: RecordingReply()))
    await app.start()
    memory = app.memory
    said: dict[str, int] = {}

    async def say(author: str, text: str) -> str:
        reply = Alone()
        said[text] = len(said) + 1
        await app.dispatch(Incoming("telegram", SCOPE, CHANNEL, author, author.split("-")[0], text,
                                    message_id=f"m{said[text]}"), reply)
        await app.settled()
        return reply.sent()

    async def row_id(text: str) -> int:
        return await app.db.fetchval("SELECT id FROM memory_messages WHERE text=?", (text,))

    try:
        first, question = f"{GONE} harbour ferries stop on monday", f"what did the {GONE} crews say?"
        await say(ALICE, first)
        await say(BOB, f"{KEPT} bakery opens early on sundays")
        await say(ALICE, question)   # a reply to a report: remembered, and asked to its report agent
        await memory.embedded()      # each in its world (stored first, routed after)
        await memory.merge(SCOPE)    # one world now; the others' names went into the merge history
        await say(BOB, f"{KEPT} bread prices rise again")
        await memory.embedded()
        await app.db.execute("INSERT INTO simulations(id, scope, channel, requirement, folder, created_at)"
                             " VALUES ('s1', ?, ?, 'what next?', ?, '2026-01-01')", (SCOPE, CHANNEL, str(tmp_path)))
        for asked in (question, "what about the bakery?"):
            await chat_store.record(app.db, "s1", SCOPE, CHANNEL, "telegram:" + ALICE, asked, "an answer", 1, 0)
        world = await app.db.fetchval("SELECT world_id FROM memory_messages WHERE text=?", (first,))
        # The merged world keeps one of the three names, whichever world absorbed the others: named
        # here after Alice's message, as it would be had hers absorbed them, so the rename is seen.
        await app.db.execute("UPDATE worlds SET topic=? WHERE id=?", (f"{GONE} harbour ferries", world))
        fact = NewBelief(f"the {GONE} union", "plans", f"a {INFERRED} march", 0.9, False,
                         [await row_id(f"{KEPT} bread prices rise again")], utcnow())
        async with app.db.transaction() as conn:
            await belief_store.apply(conn, SCOPE, world, [fact], await app.embedder.embed([fact.text()]), utcnow())
        belief = await app.db.fetchval("SELECT max(id) FROM beliefs")
        before = await tables_holding(app.db, GONE)
        assert {"memory_messages", "worlds", "world_merges", "report_chat", "beliefs"} <= before, before
        assert "beliefs" in await tables_holding(app.db, INFERRED)

        assert f"B{belief}" in await say(BOB, f"/forget belief B{belief}")   # it rests only on Bob's message
        done = await say(BOB, "/forget confirm")
        assert done.startswith("Forgot that belief: 0 messages, 1 belief,") and "report agents" not in done
        assert await tables_holding(app.db, INFERRED) == set()   # the search index's too

        assert "[M" in await say(ALICE, f"/forget message M{await row_id(first)}")
        assert (await say(ALICE, "/forget confirm")).startswith("Forgot that message: 1 message,")
        prompt = await say(ALICE, f"/forget message M{await row_id(question)}")
        assert "if it asked a report agent, that question and its answer" in prompt
        done = await say(ALICE, "/forget confirm")
        assert done.startswith("Forgot that message: 1 message,")
        assert "Also removed: 1 question to report agents, with its answer." in done

        assert await tables_holding(app.db, GONE) == set()
        await memory.flush()   # the worlds that lost something are named properly again: still nothing
        assert await tables_holding(app.db, GONE) == set()
        assert {"memory_messages"} <= await tables_holding(app.db, KEPT)   # Bob's stay
        assert [r[0] for r in await app.db.fetchall("SELECT question FROM report_chat")] == ["what about the bakery?"]
    finally:
        await app.close()
