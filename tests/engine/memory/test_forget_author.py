"""Forgetting one person: their messages in one scope go, with the beliefs resting only on them;
beliefs that also rest on other people's messages stay, without the forgotten sources."""
from __future__ import annotations

import json
import re

from engine.config import E5_MODEL, LLMSection
from engine.llm import LLMClient
from engine.memory.extraction import SYSTEM_PROMPT
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.memory import Chat, close_engine, open_engine


def one_belief_per_line_and_one_for_all(body: dict):
    if not body["messages"][0]["content"].startswith(SYSTEM_PROMPT):
        return json.dumps({"name": "rivers"}) if "name chat topics" in body["messages"][0]["content"] else "ok"
    lines = re.findall(r"^\[(\d+)\] (\w+): (.*)$", body["messages"][1]["content"], re.M)
    beliefs = [{"subject": author, "predicate": "said", "object": text, "confidence": 0.9, "exclusive": False,
                "sources": [int(n)]} for n, author, text in lines]
    beliefs.append({"subject": "the river", "predicate": "is", "object": "rising", "confidence": 0.8,
                    "exclusive": False, "sources": [int(n) for n, _, _ in lines]})
    return json.dumps({"beliefs": beliefs})


async def test_forget_author_removes_only_their_messages_and_beliefs(db_url):
    with FakeOpenAI(one_belief_per_line_and_one_for_all) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, model=E5_MODEL, extract_every_n=1000, extract_every_s=600)
        here, elsewhere = Chat("test:1"), Chat("test:2")
        said = [(here, "ann", "a1", "the river is rising near the mill"),
                (here, "bob", "b1", "the ferry stops when the river floods"),
                (here, "ann", "a1", "sandbags are stacked by the bridge"),
                (here, "bob", "b1", "the river rose a metre overnight"),
                (elsewhere, "bob", "b1", "the river in town is calm")]
        for chat, name, author_id, text in said:
            message = chat.msg(text, author=name)
            message.author_id = author_id
            await engine.ingest(message)
        await engine.flush()

        async def beliefs(scope: str) -> dict[str, list[str]]:
            rows = await db.fetchall("SELECT b.subject, b.object, b.sources FROM beliefs b WHERE b.scope=?", (scope,))
            texts = {r["id"]: r["text"] for r in await db.fetchall("SELECT id, text FROM memory_messages")}
            return {f"{r['subject']} {r['object']}": sorted(texts[s] for s in json.loads(r["sources"])) for r in rows}

        assert len(await beliefs("test:1")) == 5
        assert (await engine.cache.scope("test:1")).speaker("b1") is not None   # routing's mean of their lines
        counts = await engine.forget_author("test:1", "b1")
        assert (await engine.cache.scope("test:1")).speaker("b1") is None
        assert counts["messages"] == 2 and counts["beliefs"] == 2
        left = await db.fetchall("SELECT author_id, text FROM memory_messages WHERE scope='test:1' ORDER BY id")
        assert [r["author_id"] for r in left] == ["a1", "a1"]
        assert await beliefs("test:1") == {
            "ann the river is rising near the mill": ["the river is rising near the mill"],
            "ann sandbags are stacked by the bridge": ["sandbags are stacked by the bridge"],
            "the river rising": ["sandbags are stacked by the bridge", "the river is rising near the mill"]}
        assert sum(w.evidence for w in await engine.worlds("test:1")) == 2
        # the same person elsewhere is another scope's business
        assert [r["text"] for r in await db.fetchall(
            "SELECT text FROM memory_messages WHERE scope='test:2'")] == ["the river in town is calm"]
        assert {e.author for e in (await engine.recall("test:1", "the river floods")).evidence} == {"ann"}
        await close_engine(db, engine)
        await llm.close()
