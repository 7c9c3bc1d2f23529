"""What a member controls of memory, in the engine, on SQLite and PostgreSQL: their opt-out holds
on every message handed to storage, forgetting one message or one belief leaves no trace any query
can find (a seeded property test over many cases), their export holds everything the database
holds of them, decay retires beliefs and archives quiet worlds without deleting anything, and the
channel catch-up with the fake endpoint and without an LLM."""
from __future__ import annotations

import json
import random
import re
from datetime import timedelta

import numpy as np
import pytest

from engine.config import LLMSection
from engine.llm import LLMClient
from engine.memory.audience import Viewer
from engine.memory.catchup import SYSTEM_PROMPT as CATCHUP_PROMPT
from engine.memory.keyword_sql import keyword_beliefs, keyword_messages
from engine.memory.models import from_blob, utcnow
from engine.memory.router import normalise
from engine.memory.textutil import fts_query
from tests.fakes.openai_server import FakeOpenAI, Raw
from tests.helpers.memory import T0, Chat, add_belief as helpers_add_belief, close_engine, open_engine, said

pytestmark = pytest.mark.timeout(300)
SCOPE = "test:members"
TOPICS = ["the river ferry timetable changes when the water is high",
          "sourdough bread needs a hot oven and a long proof",
          "the football match on saturday ended in a draw",
          "our python service reads csv files with pandas",
          "the garden tomatoes need water every evening"]


async def add_belief(engine, db, world_id: str, subject: str, obj: str, sources: list[int], confidence=0.9):
    return await helpers_add_belief(engine, db, SCOPE, world_id, subject, obj, sources, confidence)


# -- opt-out ------------------------------------------------------------------------------------

async def test_an_opted_out_member_has_no_message_stored_by_id_or_by_name(db_url):
    db, engine = await open_engine(db_url)
    try:
        chat, other = Chat(SCOPE), Chat("test:other")
        await engine.ingest(said(chat, "the ferry leaves at nine", "Ann Lee", "a1"))
        await engine.opt_out(SCOPE, "a1", "Ann Lee")
        batch = [said(chat, "the ferry is late again today", "Ann Lee", "a1"),          # live, by id
                 said(chat, "the ferry had a new captain", "ann   LEE", ""),            # imported, by name
                 said(chat, "the bakery sells rye on sundays", "Bob", "b1"),
                 said(chat, "history from an export about bread", "Bob", ""),
                 said(other, "Ann in another server talks about cake", "Ann Lee", "a1")]
        kept, withheld = await engine.withhold(batch)
        assert (withheld.by_id, withheld.by_name) == (1, 1)
        assert [m.text for m in kept] == [batch[2].text, batch[3].text, batch[4].text]
        await engine.ingest_many(batch)   # the one way into storage applies it by itself
        rows = await db.fetchall("SELECT scope, text FROM memory_messages ORDER BY id")
        assert [(r["scope"], r["text"]) for r in rows] == [
            (SCOPE, "the ferry leaves at nine"), (SCOPE, batch[2].text), (SCOPE, batch[3].text),
            ("test:other", batch[4].text)]   # what was stored before stays; another scope is its own
        assert [o.author_id for o in await engine.opted_out(SCOPE)] == ["a1"]
        assert await engine.opt_in(SCOPE, "a1") and not await engine.opt_in(SCOPE, "a1")
        await engine.ingest(said(chat, "back on the ferry news", "Ann Lee", "a1"))
        assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE author_id='a1' AND scope=?",
                                 (SCOPE,)) == 2
    finally:
        await close_engine(db, engine)


# -- /me ------------------------------------------------------------------------------------------

async def test_about_a_member_shows_only_what_the_asking_channel_reads(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.3)
    try:
        chat = Chat(SCOPE)
        await engine.ingest(said(chat, TOPICS[0], "Ann Lee", "a1"))
        await engine.ingest(said(chat, "the ferry timetable is printed at the harbour", "Ann Lee", "a1"))
        staff = said(chat, "staff only: the ferry budget is cut", "Ann Lee", "a1", channel="staff")
        staff.audience = "900"
        await engine.ingest(staff)
        await engine.ingest(said(chat, TOPICS[1], "bob", "b1"))
        rows = await db.fetchall("SELECT id, world_id, author_id, channel FROM memory_messages ORDER BY id")
        public, hidden = rows[0], rows[2]
        resting = await add_belief(engine, db, public["world_id"], "the ferry", "timetable", [public["id"]])
        naming = await add_belief(engine, db, rows[3]["world_id"], "ann", "bakes sourdough", [rows[3]["id"]])
        secret = await add_belief(engine, db, hidden["world_id"], "ann lee", "budget is cut", [hidden["id"]])
        other = await add_belief(engine, db, rows[3]["world_id"], "annabel", "likes rye", [rows[3]["id"]])
        seen = await engine.about(Viewer(SCOPE), "a1", "Ann Lee")
        assert (seen.messages, seen.elsewhere) == (2, 1)
        assert [b.id for b in seen.resting] == [resting] and [b.id for b in seen.naming] == [naming]
        assert sum(n for _, n in seen.worlds) == 2 and seen.opt_out is None
        inside = await engine.about(Viewer(SCOPE, "900"), "a1", "Ann Lee")
        assert (inside.messages, inside.elsewhere) == (3, 0)
        assert {b.id for b in inside.naming} == {naming, secret} and other not in {b.id for b in inside.naming}
        await engine.opt_out(SCOPE, "a1", "Ann Lee")
        assert (await engine.about(Viewer(SCOPE), "a1", "Ann Lee")).opt_out.author_name == "Ann Lee"
    finally:
        await close_engine(db, engine)


# -- forgetting: a property over many seeded cases ------------------------------------------------

def graph_built(engine) -> bool:
    """Whether the scope's message vectors are answered by an hnswlib graph (above recall_exact_max)."""
    vectors = engine.messages._scopes.get(("memory_messages", SCOPE))
    return vectors is not None and any(p._graph is not None for p in vectors.parts.values())


def marker(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(4))


async def test_forgotten_messages_and_beliefs_leave_no_trace_in_any_query(db_url):
    """After forgetting some messages (or one belief, or one person), no recall, keyword search,
    vector search (exact and hnswlib), /world, digest or export returns them, nor a belief that
    rested only on them; beliefs that also rest on kept messages stay without them; the worlds
    that lost messages are recentred on what they hold."""
    rng = random.Random(20240611)
    db, engine = await open_engine(db_url, recall_exact_max=8, base_threshold=0.35)
    try:
        chat = Chat(SCOPE)
        people = [(name, name[0] + "1") for name in ("ann", "bob", "cyd", "dee", "eve", "fay")]
        words: dict[str, str] = {}   # the unique word of each message, by its text
        messages = []
        for n in range(48):
            word = marker(rng)
            who, wid = people[n % len(people)]
            text = f"{rng.choice(TOPICS)}, says {word}"
            words[text] = word
            messages.append(said(chat, text, who, wid, channel=rng.choice(["general", "news"])))
        await engine.ingest_many(messages)
        rows = await db.fetchall("SELECT id, world_id, text FROM memory_messages WHERE scope=? ORDER BY id", (SCOPE,))
        for _ in range(14):   # beliefs on one message, and on two
            picked = rng.sample(rows, rng.choice([1, 2]))
            await add_belief(engine, db, picked[0]["world_id"], "someone",
                             " and ".join(words[r["text"]] for r in picked), [r["id"] for r in picked])
        viewer = Viewer(SCOPE)
        await engine.recall(viewer, "ferry")            # loads the vectors: above recall_exact_max, a graph
        await engine.messages.settle()
        cases = 0
        while cases < 12:
            rows = await db.fetchall("SELECT id, world_id, author_id, text, embedding FROM memory_messages "
                                     "WHERE scope=? ORDER BY id", (SCOPE,))
            beliefs = {r["id"]: json.loads(r["sources"]) for r in await db.fetchall(
                "SELECT id, sources FROM beliefs WHERE scope=?", (SCOPE,))}
            if len(rows) < 4:
                break
            action = rng.choice(["messages", "messages", "messages", "belief", "author"] if beliefs else ["messages"])
            if action == "messages":
                gone = rng.sample(rows, rng.randint(1, 3))
                await engine.messages.settle()
                assert graph_built(engine)
                # the vector index answered before: each forgotten message was findable by its own vector
                for r in gone:
                    assert r["id"] in [i for i, _ in await engine.messages.search(
                        db, viewer, from_blob(r["embedding"]), 5)]
                await engine.forget_messages(SCOPE, [r["id"] for r in gone])
            elif action == "author":
                author = rng.choice([r["author_id"] for r in rows])
                gone = [r for r in rows if r["author_id"] == author]
                await engine.forget_author(SCOPE, author)
            else:
                belief = rng.choice(sorted(beliefs))
                belief_text = await db.fetchval("SELECT object FROM beliefs WHERE id=?", (belief,))
                await engine.forget_belief(SCOPE, belief)
                found = await engine.recall(viewer, belief_text, 20)
                assert belief not in [b.id for b in found.beliefs]
                assert belief not in [i for i, _ in await keyword_beliefs(db, viewer, fts_query(belief_text), 50)]
                vec = (await engine.embedder.embed(["someone said " + belief_text]))[0]
                assert belief not in [i for i, _ in await engine.messages.search(db, viewer, vec, 50, "beliefs")]
                assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=?", (SCOPE,)) == len(rows)
                cases += 1
                continue
            cases += 1
            ids = {r["id"] for r in gone}
            left = await db.fetchall("SELECT id, world_id, embedding FROM memory_messages WHERE scope=?", (SCOPE,))
            assert not ids & {r["id"] for r in left}
            after = {r["id"]: json.loads(r["sources"]) for r in await db.fetchall(
                "SELECT id, sources FROM beliefs WHERE scope=?", (SCOPE,))}
            for b, sources in beliefs.items():
                kept = [s for s in sources if s not in ids]
                assert after.get(b) == (kept or None), (b, sources, ids)   # only-on-forgotten beliefs are gone
            export = await engine.export_member(SCOPE, author_id=rng.choice(people)[1])
            assert not ids & {m["id"] for m in export["messages"]}
            digest = await engine.digest(viewer, T0 - timedelta(days=1))
            assert sum(w.added for w in digest.new_worlds + digest.grown_worlds) == len(left)
            dropped = set(beliefs) - set(after)
            assert not dropped & {b.id for b in digest.new_beliefs}
            for r in gone:
                word = words[r["text"]]
                found = await engine.recall(viewer, word, 20)
                assert not ids & {e.id for e in found.evidence}
                assert all(word not in b.object or b.id in after for b in found.beliefs)
                assert not ids & {i for i, _ in await keyword_messages(db, viewer, fts_query(word), 50)}
                near = await engine.messages.search(db, viewer, from_blob(r["embedding"]), 50)
                assert not ids & {i for i, _ in near}
            await engine.messages.settle()   # the hnswlib graph rebuilt from what is left
            for r in gone:
                near = await engine.messages.search(db, viewer, from_blob(r["embedding"]), 50)
                assert near and not ids & {i for i, _ in near}
                for w in await engine.worlds(viewer):
                    shown = await engine.world(viewer, w.id)
                    assert not dropped & {b.id for b in shown[1]}
            # the worlds that lost messages are recentred on what they still hold
            state = await engine.cache.scope(SCOPE)
            for wid in {r["world_id"] for r in gone} & set(state.worlds):
                held = [from_blob(r["embedding"]) for r in left if r["world_id"] == wid]
                if held:
                    expected = normalise(np.mean(held, axis=0))
                    stored = from_blob(await db.fetchval("SELECT centroid FROM worlds WHERE id=?", (wid,)))
                    assert float(stored @ expected) == pytest.approx(1.0, abs=1e-4)
                    assert float(state.index_of(wid).vector(wid) @ expected) == pytest.approx(1.0, abs=1e-4)
        assert cases == 12
    finally:
        await close_engine(db, engine)


# -- export --------------------------------------------------------------------------------------

async def test_an_export_holds_every_message_and_every_belief_resting_on_them(db_url):
    db, engine = await open_engine(db_url)
    try:
        chat = Chat(SCOPE)
        for n in range(12):
            await engine.ingest(said(chat, f"{TOPICS[n % 5]} number {n}", ["ann", "bob"][n % 2], ["a1", "b1"][n % 2],
                                     channel=["general", "staff"][n % 3 == 0]))
        rows = await db.fetchall("SELECT id, world_id, author_id FROM memory_messages ORDER BY id")
        mine = [r["id"] for r in rows if r["author_id"] == "a1"]
        theirs = [r["id"] for r in rows if r["author_id"] == "b1"]
        only_mine = await add_belief(engine, db, rows[0]["world_id"], "ann", "ferries", mine[:2])
        shared = await add_belief(engine, db, rows[0]["world_id"], "both", "bread", [mine[2], theirs[0]])
        await add_belief(engine, db, rows[1]["world_id"], "bob", "football", theirs[:2])
        await db.execute("UPDATE beliefs SET retired_at=? WHERE id=?", ("2025-09-01T00:00:00+00:00", only_mine))
        data = await engine.export_member(SCOPE, author_id="a1")
        expected = await db.fetchall("SELECT id, channel, text, ts FROM memory_messages WHERE scope=? AND author_id=?"
                                     " ORDER BY id", (SCOPE, "a1"))
        assert [(m["id"], m["channel"], m["text"], m["ts"]) for m in data["messages"]] == [
            (r["id"], r["channel"], r["text"], r["ts"]) for r in expected]
        assert {b["id"]: (b["sources"], b["other_sources"]) for b in data["beliefs"]} == {
            only_mine: (mine[:2], 0), shared: ([mine[2]], 1)}   # retired ones are history, exported too
        assert next(b for b in data["beliefs"] if b["id"] == only_mine)["retired_at"].startswith("2025-09-01")
    finally:
        await close_engine(db, engine)


# -- lifecycle -------------------------------------------------------------------------------------

async def test_decay_retires_beliefs_and_archives_quiet_worlds_without_deleting_anything(db_url):
    db, engine = await open_engine(db_url, half_life_days=30, belief_floor=0.05, world_ttl_days=30,
                                   base_threshold=0.3)
    try:
        chat = Chat(SCOPE)
        ferry = await engine.ingest(said(chat, TOPICS[0], "ann", "a1"))
        await engine.ingest(said(chat, "the ferry timetable is printed at the harbour office", "bob", "b1"))
        bread = await engine.ingest(said(chat, TOPICS[1], "ann", "a1"))
        assert ferry.world_id != bread.world_id
        first = await db.fetchval("SELECT min(id) FROM memory_messages")
        belief = await add_belief(engine, db, ferry.world_id, "the ferry", "timetable changes", [first])
        assert (await engine.maintain(SCOPE))["retired"] == 0   # fresh: nothing fades yet
        later = utcnow() + timedelta(days=200)                  # 0.9 x 0.5^(200/30) < 0.05
        totals = await engine.maintain(SCOPE, now=later)
        assert totals["retired"] == 1 and totals["archived"] == 1
        assert await db.fetchval("SELECT retired_at FROM beliefs WHERE id=?", (belief,)) is not None
        assert await db.fetchval("SELECT count(*) FROM memory_messages") == 3   # nothing deleted
        assert await db.fetchval("SELECT count(*) FROM worlds") == 2
        viewer = Viewer(SCOPE)
        assert [w.id for w in await engine.worlds(viewer)] == [bread.world_id]  # a world without beliefs stays
        assert await engine.world(viewer, ferry.world_id) is None
        found = await engine.recall(viewer, "when does the ferry timetable change")
        assert found.evidence and found.evidence[0].world_id == ferry.world_id   # still evidence
        assert not found.beliefs                                                # retired: out of recall
        digest = await engine.digest(viewer, T0 - timedelta(days=1))
        assert ferry.world_id not in {w.id for w in digest.new_worlds + digest.grown_worlds}
        assert belief not in {b.id for b in digest.new_beliefs}
        again = await engine.ingest(said(chat, "the ferry timetable changes again with the high water", "cyd", "c1"))
        assert again.world_id != ferry.world_id   # out of routing: the topic starts a world of its own
        # the command line lists archived worlds for the operator
        assert {w.id: w.archived_at is not None for w in await engine.worlds(Viewer.operator(SCOPE), True)} == {
            ferry.world_id: True, bread.world_id: False, again.world_id: False}
    finally:
        await close_engine(db, engine)


# -- catch-up ------------------------------------------------------------------------------------

async def chat_for_catchup(engine) -> tuple[Chat, object]:
    """bob wrote, then ann and cyd talked about the ferry and about bread; a staff channel too."""
    chat = Chat(SCOPE, step_s=60)
    await engine.ingest(said(chat, "I am off for the afternoon, see you later", "bob", "b1"))
    since = chat.msg("x").ts
    lines = [("ann", "the ferry timetable changes on monday because of the high water"),
             ("cyd", "will the early ferry still run at six?"),
             ("ann", "we decided to print the new ferry timetable at the harbour office"),
             ("cyd", "the sourdough bread needs a hotter oven and a longer proof"),
             ("ann", "the bakery will bake rye bread on sundays from now on"),
             ("cyd", "who picks up the bread order on saturday?")]
    for who, text in lines:
        await engine.ingest(said(chat, text, who, who[0] + "1"))
    staff = said(chat, "staff only: the ferry budget is cut", "ann", "a1", channel="staff")
    staff.audience = "900"   # a channel only some members read
    await engine.ingest(staff)
    return chat, since


async def test_catchup_without_an_llm_shows_the_most_central_messages_per_topic(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.3, catchup_extractive=2)
    try:
        chat, since = await chat_for_catchup(engine)
        last, at = await engine.last_said(SCOPE, "general", "b1")
        assert at < since
        result = await engine.catchup(Viewer(SCOPE), "general", at, after=last)
        assert result.messages == 6 and not result.summarised
        assert len(result.worlds) >= 2 and sum(w.messages for w in result.worlds) + result.other_worlds >= 6
        shown = [e.text for w in result.worlds for e in w.central]
        assert all(len(w.central) <= 2 for w in result.worlds) and shown
        assert not any("staff only" in t or "off for the afternoon" in t for t in shown)
        assert (await engine.catchup(Viewer(SCOPE), "staff", since)).messages == 0   # not this audience's
        assert (await engine.catchup(Viewer(SCOPE, "900"), "staff", since)).messages == 1
    finally:
        await close_engine(db, engine)


def summarise(body: dict):
    if body["messages"][0]["content"].startswith(CATCHUP_PROMPT[:40]):
        prompt = body["messages"][1]["content"]
        numbers = {int(n): text for n, text in re.findall(r"^\[(\d+)\] \w+ \([^)]*\): (.*)$", prompt, re.M)}
        ferry = [n for n, t in numbers.items() if "ferry" in t]
        bread = [n for n, t in numbers.items() if "bread" in t or "bakery" in t or "sourdough" in t]
        question = next(n for n, t in numbers.items() if t.endswith("six?"))
        topics = re.findall(r"^Topic (\d+): ", prompt, re.M)
        return json.dumps({"topics": [
            {"topic": int(topics[0]), "points": [{"text": "The ferry timetable changes", "sources": ferry + [999]}],
             "decisions": [{"text": "The timetable is printed at the harbour", "sources": ferry[-1:]}],
             "questions": [{"text": "Does the early ferry still run?", "sources": [question]},
                           {"text": "An item without a source", "sources": []}]},
            {"topic": 99, "points": [{"text": "a topic that does not exist", "sources": bread}]}]})
    return json.dumps({"name": "topic"})


async def test_catchup_with_an_llm_is_one_call_citing_stored_messages(db_url):
    with FakeOpenAI(summarise) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, base_threshold=0.3)
        try:
            chat, since = await chat_for_catchup(engine)
            engine.llm = llm
            server.requests.clear()
            result = await engine.catchup(Viewer(SCOPE), "general", since)
            calls = [r for r in server.requests if r["messages"][0]["content"].startswith(CATCHUP_PROMPT)]
            assert len(calls) == 1 and result.summarised
            assert calls[0]["messages"][0]["content"].endswith("Answer in English.")   # the channel's language
            assert "staff only" not in calls[0]["messages"][1]["content"]
            stored = {r["id"]: r for r in await db.fetchall("SELECT id, author, text FROM memory_messages")}
            first = result.worlds[0]
            assert first.points[0].text == "The ferry timetable changes"
            cited = first.points[0].sources
            assert cited and all(stored[e.id]["text"] == e.text and "ferry" in e.text for e in cited)  # 999 dropped
            assert first.points[0].people == list(dict.fromkeys(stored[e.id]["author"] for e in cited))
            assert [q.text for q in first.questions] == ["Does the early ferry still run?"]   # no source: dropped
            assert first.questions[0].people == ["cyd"]
            assert not any(i.text == "a topic that does not exist" for w in result.worlds for i in w.points)
        finally:
            await close_engine(db, engine)
            await llm.close()


async def test_catchup_calls_are_counted_against_the_scope_and_a_failing_llm_falls_back(db_url):
    with FakeOpenAI(summarise) as server:
        db, engine = await open_engine(db_url, base_threshold=0.3)
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", max_retries=0), db)
        try:
            chat, since = await chat_for_catchup(engine)
            engine.llm = llm
            await engine.catchup(Viewer(SCOPE), "general", since)
            rows = await db.fetchall("SELECT job, scope, calls FROM llm_usage WHERE job='memory.catchup'")
            assert [(r["scope"], r["calls"]) for r in rows] == [(SCOPE, 1)]
            server.responder = lambda body: Raw(500, {"error": {"message": "overloaded"}})
            failed = await engine.catchup(Viewer(SCOPE), "general", since)
            assert failed.error and not failed.summarised and all(w.central for w in failed.worlds)
        finally:
            await close_engine(db, engine)
            await llm.close()
