"""Randomized isolation: many scopes share the same sentences and message ids, yet recall, ask,
worlds, world lookup, extraction and forgetting never reach across scopes."""
from __future__ import annotations

import json
import random
import re
from datetime import timedelta

from engine.config import LLMSection
from engine.llm import LLMClient
from engine.memory import MemoryMessage
from engine.memory.extraction import SYSTEM_PROMPT
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.memory import T0, close_engine, open_engine

SHARED = [
    "how do I read a csv file with pandas", "pandas groupby is slow on big frames",
    "my sourdough bread did not rise", "the oven needs to be hotter for bread",
    "the striker scored twice last night", "our defence was terrible in the second half",
    "flights to lisbon are cheap in march", "the hotel near the station was noisy",
]
SCOPES = [f"discord:{i}" for i in range(8)]


def marker(scope: str) -> str:
    return "token" + "abcdefgh"[int(scope.split(":")[1])] * 3  # tokenaaa, tokenbbb, ...


def extract_everything(body: dict):
    if not body["messages"][0]["content"].startswith(SYSTEM_PROMPT):
        return json.dumps({"name": "topic"}) if "name chat topics" in body["messages"][0]["content"] else "answer"
    lines = re.findall(r"^\[(\d+)\] (\w+): (.*)$", body["messages"][1]["content"], re.M)
    return json.dumps({"beliefs": [{"subject": author, "predicate": "said", "object": text, "confidence": 0.9,
                                    "exclusive": False, "sources": [int(n)]} for n, author, text in lines]})


async def test_nothing_crosses_scopes(db_url):
    rng = random.Random(20250301)
    with FakeOpenAI(extract_everything) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, extract_every_n=1000, extract_every_s=600)
        messages = []
        for scope in SCOPES:
            lines = rng.sample(SHARED, 6) + [f"{marker(scope)} is the secret word of {text}" for text in
                                              rng.sample(SHARED, 2)]
            for n, text in enumerate(lines):
                # Same channel names and platform ids in every scope.
                messages.append(MemoryMessage(scope, f"chan{n % 2}", str(n), marker(scope),
                                              text, T0 + timedelta(minutes=n)))
        rng.shuffle(messages)
        messages.sort(key=lambda m: m.ts)  # interleaved scopes, each scope in its own order
        results = await engine.ingest_many(messages)
        assert len(results) == len(messages)
        await engine.flush()
        await engine.maintain()

        scope_of_world = {r["id"]: r["scope"] for r in await db.fetchall("SELECT id, scope FROM worlds")}
        for scope in SCOPES:
            others = [marker(s) for s in SCOPES if s != scope]
            worlds = await engine.worlds(scope)
            assert worlds and all(w.scope == scope and scope_of_world[w.id] == scope for w in worlds)
            assert sum(w.evidence for w in worlds) == 8
            foreign = [w for w, s in scope_of_world.items() if s != scope]
            for wid in rng.sample(foreign, 5):
                assert await engine.world(scope, wid) is None
            for query in rng.sample(SHARED, 3) + [f"{m} secret word" for m in rng.sample(others, 2)]:
                found = await engine.recall(scope, query, 20)
                assert found.world.scope == scope
                assert found.evidence and found.beliefs
                texts = [e.text for e in found.evidence] + [b.text() for b in found.beliefs]
                assert not any(o in t for o in others for t in texts), (scope, query, texts)
                assert all(scope_of_world[b.world_id] == scope for b in found.beliefs)
                server.requests.clear()
                answer = await engine.ask(scope, query)
                assert answer.answer == "answer"
                sent = server.requests[-1]["messages"]
                context = sent[-1]["content"].split("\n\nQuestion:")[0]  # the question itself may name others
                assert not any(o in context for o in others)
            detail = await engine.world(scope, worlds[0].id)
            assert all(b.world_id == worlds[0].id and marker(scope) in b.subject for b in detail[1])

        # Forgetting one scope (and one channel of another) leaves every other scope as it was.
        before = {s: sum(w.evidence for w in await engine.worlds(s)) for s in SCOPES}
        await engine.forget(SCOPES[0])
        await engine.forget(SCOPES[1], "chan0")
        assert await engine.worlds(SCOPES[0]) == []
        assert sum(w.evidence for w in await engine.worlds(SCOPES[1])) == 4
        for s in SCOPES[2:]:
            assert sum(w.evidence for w in await engine.worlds(s)) == before[s]
        assert (await engine.recall(SCOPES[0], "pandas")).world is None
        await close_engine(db, engine)
        await llm.close()
