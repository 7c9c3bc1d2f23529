"""Structured-output modes against the fake endpoint playing llama-cpp-python's answers: a refused
mode falls back at its first refusal whatever the status, json_object carries the schema, a
refused schema field falls back to bare json_object, and the mode learnt survives a restart."""
from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel, Field

from engine.config import LLMSection
from engine.llm import LLMClient, LLMError
from engine.llm.schema import strict_schema
from tests.fakes.openai_server import Raw, StructuredFormats
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)


GOOD = json.dumps({"name": "Ada", "age": 36})
ASK = [{"role": "system", "content": "You describe people."}, {"role": "user", "content": "who?"}]


def make(server, db=None, **overrides) -> LLMClient:
    cfg = LLMSection(base_url=server.base_url, model="m", timeout_s=5, retry_max_wait_s=0.05, **overrides)
    return LLMClient(cfg, db)


def formats(server) -> list[str]:
    """Each request's response format: its type, '+schema' when it carries one, '-' for none."""
    out = []
    for body in server.requests:
        fmt = body.get("response_format")
        out.append("-" if fmt is None else fmt["type"] + ("+schema" if "schema" in fmt else ""))
    return out


async def test_llama_cpp_500_refusal_falls_back_at_once_and_json_object_carries_the_schema(openai_server, db):
    openai_server.responder = StructuredFormats(lambda body: GOOD)
    llm = make(openai_server, db)
    assert await llm.structured(Person, ASK) == Person(name="Ada", age=36)
    # one refused json_schema request, not max_retries + 1 of them
    assert formats(openai_server) == ["json_schema", "json_object+schema"]
    sent = openai_server.requests[1]
    assert sent["response_format"]["schema"] == strict_schema(Person)
    system = sent["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You describe people.")
    assert json.dumps(strict_schema(Person), separators=(",", ":")) in system["content"]
    assert await llm.mode_for("m") == "json_object"
    row = await db.fetchone("SELECT mode, reason FROM llm_modes WHERE endpoint=? AND model='m'",
                            (openai_server.base_url,))
    assert row["mode"] == "json_object" and "500" in row["reason"] and "'text' or 'json_object'" in row["reason"]
    await llm.close()


async def test_the_learnt_mode_survives_a_restart(openai_server, db):
    openai_server.responder = StructuredFormats(lambda body: GOOD)
    first = make(openai_server, db)
    await first.structured(Person, ASK)
    await first.close()
    openai_server.requests.clear()

    restarted = make(openai_server, db)
    assert (await restarted.structured(Person, ASK)).name == "Ada"
    assert formats(openai_server) == ["json_object+schema"]  # no json_schema request after the restart
    # another model on the same endpoint, and the same model elsewhere, start from the top
    assert await restarted.mode_for("other") == "json_schema"
    elsewhere = LLMClient(LLMSection(base_url="http://127.0.0.1:9/v1", model="m"), db)
    assert await elsewhere.mode_for("m") == "json_schema"
    await restarted.close()
    await elsewhere.close()


async def test_a_refused_schema_field_falls_back_to_bare_json_object(openai_server, db):
    openai_server.responder = StructuredFormats(lambda body: GOOD, schema_field=False)
    llm = make(openai_server, db)
    assert (await llm.structured(Person, ASK)).age == 36
    assert formats(openai_server) == ["json_schema", "json_object+schema", "json_object"]
    assert await llm.mode_for("m") == "json_object_bare"
    # the schema still travels in the prompt
    assert '"required"' in openai_server.requests[-1]["messages"][0]["content"]
    await llm.close()
    restarted = make(openai_server, db)
    assert await restarted.mode_for("m") == "json_object_bare"
    await restarted.close()


async def test_a_fixed_json_object_mode_drops_only_the_schema_field(openai_server):
    openai_server.responder = StructuredFormats(lambda body: GOOD, schema_field=False)
    llm = make(openai_server, json_mode="json_object")
    assert (await llm.structured(Person, ASK)).name == "Ada"
    assert formats(openai_server) == ["json_object+schema", "json_object"]
    await llm.close()


async def test_every_format_refused_ends_in_plain_prompting(openai_server):
    openai_server.responder = StructuredFormats(lambda body: f"Here you go: {GOOD}", refuse=frozenset({"json_object"}))
    llm = make(openai_server)
    assert (await llm.structured(Person, ASK)).name == "Ada"
    assert formats(openai_server) == ["json_schema", "json_object+schema", "json_object", "-"]
    assert await llm.mode_for("m") == "prompt"
    await llm.close()


async def test_a_server_failure_is_retried_and_teaches_nothing(openai_server, db):
    failures = iter([Raw(500, {"error": {"message": "llama_decode returned -3", "type": "internal_server_error"}}),
                     Raw(503, "Service Unavailable")])
    openai_server.responder = lambda body: next(failures, GOOD)
    llm = make(openai_server, db)
    assert (await llm.structured(Person, ASK)).name == "Ada"
    assert formats(openai_server) == ["json_schema"] * 3
    assert await db.fetchval("SELECT count(*) FROM llm_modes") == 0
    await llm.close()


async def test_a_refusal_in_prompt_mode_is_one_clear_error(openai_server):
    openai_server.responder = lambda body: Raw(500, {"error": {"message": "response_format broke everything"}})
    llm = make(openai_server, json_mode="prompt", max_retries=2)
    with pytest.raises(LLMError, match="kept failing after 3 tries"):
        await llm.structured(Person, ASK)
    assert formats(openai_server) == ["-"] * 3  # no format was asked, so it is a server failure
    await llm.close()


async def test_concurrent_requests_learn_the_mode_once(openai_server, db):
    openai_server.responder = StructuredFormats(lambda body: GOOD)
    llm = make(openai_server, db)
    answers = await asyncio.gather(*(llm.structured(Person, ASK) for _ in range(6)))
    assert all(a.name == "Ada" for a in answers)
    sent = formats(openai_server)
    assert sent.count("json_object+schema") == 6 and sent.count("json_schema") <= 6
    assert set(sent) == {"json_schema", "json_object+schema"}
    assert await db.fetchval("SELECT count(*) FROM llm_modes") == 1
    await llm.close()
