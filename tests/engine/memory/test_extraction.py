"""Belief extraction through the real LLM client and openai library against the fake endpoint:
batches per channel off the message path, dedupe, supersession, grounded /ask."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from datetime import timedelta

import pytest

from engine.config import LLMSection
from engine.llm import LLMClient
from engine.memory.digest import Digest
from engine.memory.extraction import SYSTEM_PROMPT
from engine.memory.models import utcnow
from tests.fakes.openai_server import FakeOpenAI, Raw, completion
from tests.helpers.memory import T0, Chat, close_engine, open_engine

FACTS = {
    "Alice lives in Paris": ("Alice", "lives in", "Paris", True),
    "Alice works at Acme Corp": ("Alice", "works at", "Acme Corp", True),
    "Alice moved to Berlin last week": ("Alice", "lives in", "Berlin", True),
    "Alice still works at Acme Corp": ("Alice", "works at", "Acme Corp", True),
}


def numbered(body: dict) -> list[tuple[int, str]]:
    user = body["messages"][-1]["content"] if body["messages"][-1]["role"] == "user" else body["messages"][1]["content"]
    return [(int(n), text) for n, text in re.findall(r"^\[(\d+)\] \w+: (.*)$", user, re.M)]


def responder(delay: float = 0.0):
    def answer(body: dict):
        system = body["messages"][0]["content"]
        if system.startswith(SYSTEM_PROMPT):
            beliefs = []
            for n, text in numbered(body):
                if text in FACTS:
                    s, p, o, excl = FACTS[text]
                    beliefs.append({"subject": s, "predicate": p, "object": o, "confidence": 0.6,
                                    "exclusive": excl, "sources": [n]})
            content = json.dumps({"beliefs": beliefs})
        elif "name chat topics" in system:
            content = json.dumps({"name": "Alice's life"})
        else:
            content = "Alice lives in Berlin [B3]."
        return Raw(200, completion(content), delay=delay) if delay else content
    return answer


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


async def test_extraction_batches_dedupes_and_supersedes(db_url, server):
    server.responder = responder(delay=1.5)
    llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
    db, engine = await open_engine(db_url, llm=llm, base_threshold=0.1, extract_every_n=3,
                                   extract_every_s=600)
    chat = Chat()
    engine.embedder.encode(["load the model before timing"])
    for text in ["Alice lives in Paris", "Alice works at Acme Corp"]:
        await engine.ingest(chat.msg(text))
    started = time.perf_counter()
    await engine.ingest(chat.msg("nice"))
    # The third message started a batch, and ingest did not wait for the slow LLM.
    assert time.perf_counter() - started < 1.0
    for _ in range(100):
        if server.requests:
            break
        await asyncio.sleep(0.02)
    assert len(server.requests) == 1
    assert await db.fetchval("SELECT count(*) FROM beliefs") == 0
    await engine.flush()
    rows = await db.fetchall("SELECT subject, predicate, object, confidence, sources, invalid_at FROM beliefs")
    assert {(r["predicate"], r["object"]) for r in rows} == {("lives in", "Paris"), ("works at", "Acme Corp")}
    ids = [r["id"] for r in await db.fetchall("SELECT id FROM memory_messages ORDER BY id")]
    assert {r["object"]: json.loads(r["sources"]) for r in rows} == {"Paris": [ids[0]], "Acme Corp": [ids[1]]}
    assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE extracted=0") == 0
    assert "[1] alice: Alice lives in Paris" in server.requests[0]["messages"][1]["content"]
    # The world grew to three messages: the LLM named its topic.
    assert [w.topic for w in await engine.worlds(chat.scope)] == ["Alice's life"]

    server.responder = responder()
    for text in ["Alice moved to Berlin last week", "Alice still works at Acme Corp", "ok then"]:
        await engine.ingest(chat.msg(text))
    await engine.flush()
    rows = {r["object"]: r for r in await db.fetchall("SELECT * FROM beliefs")}
    assert set(rows) == {"Paris", "Berlin", "Acme Corp"}  # seen again: no duplicate
    assert rows["Acme Corp"]["confidence"] == pytest.approx(1 - 0.4 * 0.4)
    assert rows["Paris"]["invalid_at"] is not None and rows["Paris"]["superseded_by"] == rows["Berlin"]["id"]
    assert rows["Berlin"]["invalid_at"] is None
    world, beliefs = await engine.world(chat.scope, rows["Berlin"]["world_id"])
    assert [b.object for b in beliefs if not b.active] == ["Paris"]
    digest = await engine.digest(chat.scope, T0 - timedelta(days=1))
    assert [(d.old, d.new) for d in digest.superseded_beliefs] == [
        ("Alice lives in Paris", "Alice lives in Berlin")]
    assert {d.text for d in digest.new_beliefs} == {"Alice lives in Berlin", "Alice works at Acme Corp"}
    assert sum(d.added for d in digest.new_worlds) == 6 and digest.grown_worlds == []
    assert await engine.digest(chat.scope, utcnow()) == Digest()

    answer = await engine.ask(chat.scope, "Where does Alice live?")
    assert answer.answer == "Alice lives in Berlin [B3]."
    prompt = server.requests[-1]["messages"][1]["content"]
    assert f"[B{rows['Berlin']['id']}] Alice lives in Berlin" in prompt and "Paris" not in prompt.split("Messages:")[0]
    await close_engine(db, engine)
    await llm.close()


async def test_extraction_runs_after_the_quiet_period_and_survives_restart(db_url, server):
    server.responder = responder()
    llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
    db, engine = await open_engine(db_url, llm=llm, extract_every_n=100, extract_every_s=0.2)
    chat = Chat()
    await engine.ingest(chat.msg("Alice lives in Paris"))
    for _ in range(100):
        if await db.fetchval("SELECT count(*) FROM beliefs"):
            break
        await asyncio.sleep(0.05)
    assert await db.fetchval("SELECT count(*) FROM beliefs") == 1

    # Messages still unread when the bot stops are extracted after the restart.
    server.responder = lambda body: Raw(500, {"error": {"message": "down"}})
    await engine.ingest(chat.msg("Alice works at Acme Corp"))
    await close_engine(db, engine)
    server.responder = responder()
    db, engine = await open_engine(db_url, llm=llm, extract_every_n=100, extract_every_s=0.1)
    await engine.flush()
    assert await db.fetchval("SELECT count(*) FROM beliefs WHERE object='Acme Corp'") == 1
    await close_engine(db, engine)
    await llm.close()


async def test_an_endpoint_that_keeps_failing_is_one_warning_line_and_the_batch_waits(db_url, server, caplog):
    server.responder = lambda body: Raw(500, {"error": {"message": "down"}})
    llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", max_retries=0))
    db, engine = await open_engine(db_url, llm=llm, extract_every_n=1, extract_every_s=600)
    with caplog.at_level(logging.WARNING, logger="engine.memory.extraction"):
        await engine.ingest(Chat().msg("Alice lives in Paris"))   # a batch of one: extracted at once
        await engine.extraction.drain()
    (record,) = [r for r in caplog.records if r.name == "engine.memory.extraction"]
    assert record.levelno == logging.WARNING and record.exc_info is None and "HTTP 500" in record.getMessage()
    assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE extracted=0") == 1   # for a later batch
    await close_engine(db, engine)
    await llm.close()


async def test_answers_never_in_shape_are_skipped_not_retried_forever(db_url, server):
    server.responder = lambda body: "I'd rather chat about the weather."
    llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", validation_retries=1))
    db, engine = await open_engine(db_url, llm=llm, extract_every_n=100, extract_every_s=600)
    chat = Chat()
    await engine.ingest(chat.msg("Alice lives in Paris"))
    await engine.flush()
    assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE extracted=0") == 0
    assert await db.fetchval("SELECT count(*) FROM beliefs") == 0
    extraction_calls = [r for r in server.requests if r["messages"][0]["content"].startswith(SYSTEM_PROMPT)]
    assert len(extraction_calls) == 2  # the first answer and one corrective retry, then given up
    await close_engine(db, engine)
    await llm.close()
