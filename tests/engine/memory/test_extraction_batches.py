"""Belief extraction at channel scale, through the real LLM client and openai library against the
fake endpoint: one call per channel batch whatever worlds it spans (calls and prompt tokens as our
client counts them), beliefs land in their sources' world, supersession follows the time things
were said rather than the order they were extracted in (and beliefs stored before that rule are
repaired on upgrade), and garbage from the LLM is never stored."""
from __future__ import annotations

import json
import logging
import re
from datetime import timedelta

import pytest

from engine.config import LLMSection
from engine.db import discover_migrations, open_database
from engine.llm import LLMClient
from engine.llm.schema import parse_answer
from engine.memory import MemoryMessage
from engine.memory.beliefs import home_world
from engine.memory.extraction import SYSTEM_PROMPT
from engine.memory.models import iso, parse_ts
from tests.fakes.openai_server import FakeOpenAI, completion
from tests.helpers.memory import T0, Chat, close_engine, open_engine

TOPICS = [
    ["the staging deploy failed on the database migration", "rollback of the payments service finished",
     "kubernetes pods keep restarting after the deploy", "the release pipeline needs a new docker image",
     "deploy the hotfix to production after lunch"],
    ["lunch at the ramen place near the office", "the pizza order for friday is vegetarian",
     "who wants sushi for lunch today", "the new cafe downstairs sells great sandwiches",
     "bring cake for the birthday lunch"],
    ["flights to lisbon for the offsite are booked", "the offsite hotel in lisbon has a pool",
     "train tickets to porto after the offsite", "the offsite agenda has a boat trip in lisbon",
     "passport check before flying to lisbon"],
    ["the candidate for the backend role starts interviews", "hiring panel for the designer position",
     "the recruiter sent three new backend candidates", "offer letter for the data engineer went out",
     "interview loop for the frontend candidate on thursday"],
]
AUTHORS = ["anna", "ben", "chloe", "dev"]


def lines_of(body: dict) -> list[tuple[int, str, str]]:
    return [(int(n), a, t) for n, a, t in re.findall(r"^\[(\d+)\] (\w+): (.*)$", body["messages"][1]["content"], re.M)]


def without_usage(content: str) -> dict:
    """A completion that reports no usage, so the LLM client counts the prompt tokens itself."""
    answer = completion(content)
    del answer["usage"]
    return answer


def is_extraction(body: dict) -> bool:
    return body["messages"][0]["content"].startswith(SYSTEM_PROMPT)


def said_and_mentioned(body: dict):
    """One belief per message, and one resting on each run of three messages."""
    if not is_extraction(body):
        return json.dumps({"name": "topic"})
    lines = lines_of(body)
    beliefs = [{"subject": a, "predicate": "said", "object": t, "confidence": 0.9, "exclusive": False,
                "sources": [n]} for n, a, t in lines]
    for (n1, _, _), (n2, _, _), (n3, a3, t3) in zip(lines, lines[1:], lines[2:]):
        beliefs.append({"subject": a3, "predicate": "mentioned", "object": t3, "confidence": 0.7,
                        "exclusive": False, "sources": [n1, n2, n3]})
    return without_usage(json.dumps({"beliefs": beliefs}))


async def test_one_call_per_channel_batch_across_worlds(db_url):
    with FakeOpenAI(said_and_mentioned) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm)  # the default batch settings
        chat = Chat(channel="team")
        texts = [f"{TOPICS[(i // 4) % 4][i % 5]} ({i})" for i in range(80)]  # runs of four per topic
        for i, text in enumerate(texts):
            await engine.ingest(chat.msg(text, author=AUTHORS[i % 4]))  # one by one, as a chat arrives
        await engine.flush()
        n = len(texts)
        worlds = {r["id"]: r["world_id"] for r in await db.fetchall("SELECT id, world_id FROM memory_messages")}
        assert len(set(worlds.values())) >= 3  # the channel's messages live in several worlds
        calls = [b for b in server.requests if is_extraction(b)]
        usage = await llm.job_usage("memory.extract")
        assert usage.calls == len(calls) <= 0.1 * n
        assert 0 < usage.prompt_tokens <= 1000 * n
        assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE extracted=0") == 0
        # Every message was read once: as many 'said' beliefs as messages, none read twice.
        assert sum(len(lines_of(b)) for b in calls) == n
        rows = await db.fetchall("SELECT predicate, world_id, sources FROM beliefs")
        assert sum(r["predicate"] == "said" for r in rows) == n
        for r in rows:
            sources = json.loads(r["sources"])
            assert r["world_id"] == home_world([worlds[s] for s in sources])
        spanning = [r for r in rows if len({worlds[s] for s in json.loads(r["sources"])}) > 1]
        assert spanning  # some beliefs rest on messages of more than one world
        await close_engine(db, engine)
        await llm.close()


def test_home_world_is_the_majority_then_the_latest_source():
    assert home_world(["a", "b", "a"]) == "a"
    assert home_world(["a", "b"]) == "b"
    assert home_world(["b", "a", "a", "b"]) == "b"


FACTS = {
    "Alice lives in Berlin": "Berlin",
    "back then Alice lived in Paris": "Paris",
    "Alice lives in Rome now": "Rome",
    "for a while Alice lived in Oslo": "Oslo",
    "Alice lives in Berlin, as I told you": "Berlin",
}


def lives_in(body: dict):
    if not is_extraction(body):
        return json.dumps({"name": "Alice's home"})
    return json.dumps({"beliefs": [
        {"subject": "Alice", "predicate": "lives in", "object": FACTS[t], "confidence": 0.8, "exclusive": True,
         "sources": [n]} for n, _, t in lines_of(body) if t in FACTS]})


async def test_an_older_statement_extracted_later_never_supersedes_a_newer_one(db_url):
    with FakeOpenAI(lives_in) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, base_threshold=0.1, extract_every_s=600)
        said = {}

        async def say(text: str, hours: float) -> None:
            said[text] = T0 + timedelta(hours=hours)
            await engine.ingest(MemoryMessage("test:1", "general", f"m{len(said)}", "bob", text, said[text]))
            await engine.flush()

        async def beliefs() -> dict[str, dict]:
            return {r["object"]: dict(r) for r in await db.fetchall("SELECT * FROM beliefs")}

        await say("Alice lives in Berlin", 2)
        await say("back then Alice lived in Paris", 1)   # said earlier, read later (an import, a backlog)
        b = await beliefs()
        assert b["Berlin"]["invalid_at"] is None
        assert b["Paris"]["superseded_by"] == b["Berlin"]["id"]
        assert parse_ts(b["Paris"]["valid_from"]) == said["back then Alice lived in Paris"]
        assert parse_ts(b["Paris"]["invalid_at"]) == said["Alice lives in Berlin"]

        await say("Alice lives in Rome now", 4)
        await say("for a while Alice lived in Oslo", 3)   # between Berlin and Rome
        await say("Alice lives in Berlin, as I told you", 2.5)  # Berlin again, while it held: the same belief
        b = await beliefs()
        assert set(b) == {"Paris", "Berlin", "Rome", "Oslo"}
        assert [o for o, r in b.items() if r["invalid_at"] is None] == ["Rome"]
        chain = {o: next(p for p, q in b.items() if q["id"] == r["superseded_by"]) for o, r in b.items()
                 if r["superseded_by"]}
        assert chain == {"Paris": "Berlin", "Berlin": "Oslo", "Oslo": "Rome"}
        assert len(json.loads(b["Berlin"]["sources"])) == 2
        for r in b.values():
            assert r["invalid_at"] is None or parse_ts(r["invalid_at"]) >= parse_ts(r["valid_from"])
        assert parse_ts(b["Berlin"]["invalid_at"]) == said["for a while Alice lived in Oslo"]
        await close_engine(db, engine)
        await llm.close()


GOOD = {"subject": "Alice", "predicate": "lives in", "object": "Paris", "confidence": 0.9, "exclusive": True,
        "sources": [1]}
GARBAGE = [
    {"subject": "", "predicate": "lives in", "object": "Paris", "sources": [1]},
    {"subject": "unknown", "predicate": "is", "object": "N/A", "sources": [1]},
    {"subject": "Alice", "predicate": "works at", "object": "Acme...oops", "sources": [2]},
    {"subject": "Alice", "predicate": "works at", "object": "Acme Corp\u2026", "sources": [2]},
    {"subject": "Alice", "predicate": "lives in", "object": "Tokyo", "sources": [1]},
    {"subject": "Alice", "predicate": "likes", "object": "Paris " * 80, "sources": [1]},
    {"subject": "it", "predicate": "is in", "object": "Paris", "sources": [1]},
    {"subject": "Bob", "predicate": "lives in", "object": "Paris", "sources": [2]},
]


async def test_garbage_triples_are_rejected_and_logged_without_chat_text_at_warning(db_url, caplog):
    """Rejected triples are logged for debugging (at DEBUG: they quote the chat); nothing logged at
    WARNING or above carries a word of what was said."""
    def junk(body: dict):
        if not is_extraction(body):
            return json.dumps({"name": "topic"})
        # A belief with no usable source number is kept when a message of the batch names its object.
        unsourced = {"subject": "Alice", "predicate": "works at", "object": "Acme Corp", "sources": [7]}
        return json.dumps({"beliefs": [GOOD, *GARBAGE, unsourced]})

    with FakeOpenAI(junk) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, base_threshold=0.1, extract_every_s=600)
        chat = Chat()
        for text in ["Alice lives in Paris", "Alice works at Acme Corp"]:
            await engine.ingest(chat.msg(text))
        with caplog.at_level(logging.DEBUG):
            await engine.flush()
        ids = [r["id"] for r in await db.fetchall("SELECT id FROM memory_messages ORDER BY id")]
        rows = await db.fetchall("SELECT subject, predicate, object, sources FROM beliefs ORDER BY id")
        assert [(r["subject"], r["predicate"], r["object"], json.loads(r["sources"])) for r in rows] == [
            ("Alice", "lives in", "Paris", [ids[0]]), ("Alice", "works at", "Acme Corp", [ids[1]])]
        rejected = [r.getMessage() for r in caplog.records if "rejected a belief" in r.getMessage()]
        assert len(rejected) == len(GARBAGE)
        assert any("truncated object" in m for m in rejected) and any("not in its source" in m for m in rejected)
        assert {r.levelno for r in caplog.records if "rejected a belief" in r.getMessage()} == {logging.DEBUG}
        loud = [caplog.handler.format(r) for r in caplog.records if r.levelno >= logging.WARNING]
        said = ("Alice", "Paris", "Acme", "Tokyo", "Bob")
        assert not [line for line in loud if any(word in line for word in said)], loud
        await close_engine(db, engine)
        await llm.close()


CUT_OFF = ('{"beliefs": [{"subject": "Alice", "predicate": "lives in", "object": "Paris", "sources": [1]}, '
           '{"subject": "Alice", "predicate": "works at", "object": "Ac')


async def test_an_answer_that_only_parses_after_repair_stores_nothing(db_url):
    assert len(parse_answer(CUT_OFF)[0]["beliefs"]) == 2  # repair would have made two beliefs of it
    with FakeOpenAI(lambda body: CUT_OFF if is_extraction(body) else json.dumps({"name": "t"})) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", validation_retries=1))
        db, engine = await open_engine(db_url, llm=llm, extract_every_s=600)
        chat = Chat()
        for text in ["Alice lives in Paris", "Alice works at Acme Corp"]:
            await engine.ingest(chat.msg(text))
        await engine.flush()
        assert await db.fetchval("SELECT count(*) FROM beliefs") == 0
        assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE extracted=0") == 0
        calls = [b for b in server.requests if is_extraction(b)]
        assert len(calls) == 2  # asked again once, then given up
        assert "not well-formed JSON" in calls[1]["messages"][-1]["content"]
        await close_engine(db, engine)
        await llm.close()


@pytest.mark.parametrize("subject, obj", [("Alice", "Paris"), ("alice's", "paris"), ("bob", "PARIS!")])
def test_grounded_forms_pass(subject, obj):
    from engine.memory.extraction import ExtractedBelief, Source, vet
    batch = [Source(1, 10, "bob", "Alice lives in Paris", T0)]
    sources, problem = vet(ExtractedBelief(subject=subject, predicate="lives in", object=obj, sources=[1]), batch)
    assert problem is None and [s.id for s in sources] == [10]


async def test_upgrade_repairs_beliefs_that_ended_before_they_began(tmp_path):
    """Beliefs stored before supersession followed time: an older statement extracted later had
    ended a newer one. The migration makes the newer one valid again and ends the older one there."""
    repair = next(m for m in discover_migrations() if m.path.name.endswith("_extract.sql"))
    db = await open_database(tmp_path / "m.db", upgrade=False)
    await db.upgrade(target=repair.version - 1)
    at = {h: iso(T0 + timedelta(hours=h)) for h in (1, 1.5, 2, 3, 5)}
    await db.execute("INSERT INTO worlds(id, scope, topic, centroid, access_count, created_at, last_active) "
                     "VALUES ('w', 's', 't', x'00', 1, ?, ?)", (at[1], at[1]))
    rows = [  # id, object, valid_from, invalid_at, superseded_by
        (1, "paris", at[1], None, None),      # said first, extracted last: it ended Berlin
        (2, "berlin", at[2], at[1], 1),
        (3, "oslo", at[3], at[1.5], 4),       # ended by Rome, itself ended since
        (4, "rome", at[1.5], at[5], 5),
        (5, "lima", at[5], None, None)]
    await db.executemany(
        "INSERT INTO beliefs(id, scope, world_id, subject, predicate, object, norm_key, norm_object, confidence, "
        "learned_at, valid_from, invalid_at, superseded_by, decayed_at, embedding) "
        "VALUES (?, 's', 'w', 'alice', 'lives in', ?, 'alice|lives in', ?, 0.8, ?, ?, ?, ?, ?, x'00')",
        [(i, o, o, at[5], vf, inv, by, at[5]) for i, o, vf, inv, by in rows])
    await db.upgrade()
    got = {r["object"]: (r["invalid_at"], r["superseded_by"]) for r in await db.fetchall("SELECT * FROM beliefs")}
    assert got == {"paris": (at[2], 2), "berlin": (None, None), "oslo": (at[3], 4), "rome": (at[5], 5),
                   "lima": (None, None)}
    await db.close()
