"""LLMClient against a real HTTP fake of an OpenAI-compatible endpoint, with the real openai client."""
from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel, Field

from engine.config import LLMSection, ModelPrice
from engine.jobs import JobError
from engine.llm import BudgetExceeded, LLMClient, LLMError
from tests.fakes.openai_server import Raw, completion
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)
    tags: list[str]


GOOD = {"name": "Ada", "age": 36, "tags": ["math"]}


def make(server, db=None, **overrides) -> LLMClient:
    cfg = LLMSection(base_url=server.base_url, model="m", timeout_s=overrides.pop("timeout_s", 5),
                     retry_max_wait_s=overrides.pop("retry_max_wait_s", 2), **overrides)
    return LLMClient(cfg, db)


def rejecting(kinds: set[str], answer: str):
    """An endpoint that answers 400 to the response_format types in ``kinds``."""
    def respond(body):
        kind = (body.get("response_format") or {}).get("type", "none")
        if kind in kinds:
            return Raw(400, {"error": {"message": f"response_format {kind} is not supported"}})
        return answer
    return respond


async def test_json_schema_is_sent_strict(openai_server):
    openai_server.responder = lambda body: json.dumps(GOOD)
    llm = make(openai_server)
    assert await llm.structured(Person, [{"role": "user", "content": "who?"}]) == Person(**GOOD)
    fmt = openai_server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and set(schema["required"]) == {"name", "age", "tags"}
    await llm.close()


async def test_falls_back_to_json_object_and_remembers(openai_server):
    openai_server.responder = rejecting({"json_schema"}, json.dumps(GOOD))
    llm = make(openai_server)
    assert (await llm.structured(Person, [{"role": "user", "content": "who?"}])).name == "Ada"
    kinds = [(r.get("response_format") or {}).get("type") for r in openai_server.requests]
    assert kinds == ["json_schema", "json_object"]
    # the schema travels in the prompt in json_object mode
    first = openai_server.requests[1]["messages"][0]
    assert first["role"] == "system" and '"required"' in first["content"]
    await llm.structured(Person, [{"role": "user", "content": "again"}])
    assert (openai_server.requests[2].get("response_format") or {}).get("type") == "json_object"
    await llm.close()


async def test_falls_back_to_plain_prompting(openai_server):
    openai_server.responder = rejecting({"json_schema", "json_object"},
                                        "Sure! Here it is:\n```json\n" + json.dumps(GOOD) + "\n```")
    llm = make(openai_server)
    assert (await llm.structured(Person, [{"role": "user", "content": "who?"}])).age == 36
    assert "response_format" not in openai_server.requests[-1]
    assert await llm.mode_for("m") == "prompt"
    await llm.close()


async def test_fixed_mode_does_not_fall_back(openai_server):
    openai_server.responder = rejecting({"json_schema"}, json.dumps(GOOD))
    llm = make(openai_server, json_mode="json_schema")
    with pytest.raises(LLMError, match="refused the request"):
        await llm.structured(Person, [{"role": "user", "content": "who?"}])
    await llm.close()


async def test_malformed_and_truncated_json_is_repaired(openai_server):
    answers = iter(["{'name': 'Ada', 'age': 36, 'tags': ['math',],}",  # python-ish quotes, trailing commas
                    '{"name": "Bob", "age": 41, "tags": ["x", "y"'])   # cut off
    openai_server.responder = lambda body: next(answers)
    llm = make(openai_server)
    assert (await llm.structured(Person, [{"role": "user", "content": "a"}])).name == "Ada"
    assert (await llm.structured(Person, [{"role": "user", "content": "b"}])).tags == ["x", "y"]
    assert len(openai_server.requests) == 2
    await llm.close()


async def test_invalid_answer_is_retried_with_the_error(openai_server):
    answers = iter([json.dumps({"name": "Ada", "age": -3, "tags": []}), json.dumps(GOOD)])
    openai_server.responder = lambda body: next(answers)
    llm = make(openai_server)
    assert (await llm.structured(Person, [{"role": "user", "content": "who?"}])).age == 36
    retry_prompt = openai_server.requests[1]["messages"][-1]["content"]
    assert "age" in retry_prompt and "greater than or equal to 0" in retry_prompt
    await llm.close()


async def test_gives_up_after_validation_retries(openai_server):
    openai_server.responder = lambda body: "no idea"
    llm = make(openai_server, validation_retries=1)
    with pytest.raises(LLMError, match="no valid Person after 2 tries"):
        await llm.structured(Person, [{"role": "user", "content": "who?"}])
    assert len(openai_server.requests) == 2
    await llm.close()


async def test_429_honours_retry_after(openai_server):
    calls = []

    def respond(body):
        calls.append(time.monotonic())
        if len(calls) == 1:
            return Raw(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "1"})
        return "fine"
    openai_server.responder = respond
    llm = make(openai_server)
    assert await llm.chat([{"role": "user", "content": "hi"}]) == "fine"
    assert calls[1] - calls[0] >= 0.95
    await llm.close()


async def test_500s_are_retried_then_reported(openai_server):
    statuses = iter([500, 503])
    openai_server.responder = lambda body: Raw(next(statuses, 200), {"error": {"message": "boom"}}) \
        if len(openai_server.requests) <= 2 else "recovered"
    llm = make(openai_server, retry_max_wait_s=0.05)
    assert await llm.chat([{"role": "user", "content": "hi"}]) == "recovered"
    assert len(openai_server.requests) == 3

    openai_server.responder = lambda body: Raw(500, {"error": {"message": "down"}})
    openai_server.requests.clear()
    llm2 = make(openai_server, retry_max_wait_s=0.01, max_retries=2)
    with pytest.raises(LLMError, match="kept failing after 3 tries"):
        await llm2.chat([{"role": "user", "content": "hi"}])
    assert len(openai_server.requests) == 3
    await llm.close()
    await llm2.close()


async def test_timeouts_are_retried(openai_server):
    openai_server.responder = lambda body: Raw(200, completion("late"), delay=1.0) \
        if len(openai_server.requests) == 1 else "quick"
    llm = make(openai_server, timeout_s=0.3, retry_max_wait_s=0.01)
    assert await llm.chat([{"role": "user", "content": "hi"}]) == "quick"
    assert len(openai_server.requests) == 2
    await llm.close()


async def test_an_answer_that_is_no_json_is_retried_then_one_clear_error(openai_server):
    """A proxy's error page with status 200 (an endpoint flapping): retried like a 5xx, then
    reported in one sentence, never a JSONDecodeError out of the client."""
    garbage = Raw(200, "<html><body>502 Bad Gateway</body></html>")
    openai_server.responder = lambda body: garbage if len(openai_server.requests) == 1 else "recovered"
    llm = make(openai_server, retry_max_wait_s=0.01)
    assert await llm.chat([{"role": "user", "content": "hi"}]) == "recovered"
    assert len(openai_server.requests) == 2

    openai_server.responder = lambda body: garbage
    openai_server.requests.clear()
    llm2 = make(openai_server, retry_max_wait_s=0.01, max_retries=2)
    with pytest.raises(LLMError, match="answered with something that is not JSON after 3 tries"):
        await llm2.chat([{"role": "user", "content": "hi"}])
    assert len(openai_server.requests) == 3
    await llm.close()
    await llm2.close()


async def test_complete_returns_tool_calls(openai_server):
    openai_server.responder = lambda body: completion(tool_calls=[{"name": "search", "arguments": {"q": "x"}}])
    llm = make(openai_server)
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    msg = await llm.complete([{"role": "user", "content": "find x"}], tools=tools)
    assert msg.tool_calls[0].function.name == "search"
    assert openai_server.requests[0]["tools"] == tools
    await llm.close()


async def test_usage_and_budget_per_job_persist(openai_server, db):
    openai_server.responder = lambda body: completion("ok", prompt_tokens=600_000, completion_tokens=100_000)
    llm = make(openai_server, db, prices={"m": ModelPrice(input=1.0, output=2.0)}, job_budget_usd=1.5)
    await llm.chat([{"role": "user", "content": "hi"}], job="j1", scope="console:local")
    usage = await llm.job_usage("j1")
    assert usage.calls == 1 and usage.tokens == 700_000 and usage.cost_usd == pytest.approx(0.8)
    await llm.chat([{"role": "user", "content": "hi"}], job="j1")  # 1.6 USD now
    with pytest.raises(BudgetExceeded, match="budget") as info:
        await llm.chat([{"role": "user", "content": "hi"}], job="j1")
    assert isinstance(info.value, JobError)
    assert len(openai_server.requests) == 2
    # another job is unaffected; a new client (after a restart) still knows j1 is spent
    await llm.chat([{"role": "user", "content": "hi"}], job="j2")
    fresh = make(openai_server, db, prices={"m": ModelPrice(input=1.0, output=2.0)}, job_budget_usd=1.5)
    with pytest.raises(BudgetExceeded):
        await fresh.chat([{"role": "user", "content": "hi"}], job="j1")
    row = await db.fetchone("SELECT sum(calls), sum(cost_usd) FROM llm_usage WHERE scope='console:local'")
    assert row[0] == 1 and row[1] == pytest.approx(0.8)
    await llm.close()
    await fresh.close()


async def test_scope_budget_per_day(openai_server, db):
    openai_server.responder = lambda body: completion("ok", prompt_tokens=1000, completion_tokens=0)
    llm = make(openai_server, db, prices={"m": ModelPrice(input=1000.0)}, scope_budget_usd_per_day=1.0)
    await llm.chat([{"role": "user", "content": "hi"}], scope="telegram:1")
    with pytest.raises(BudgetExceeded, match="today's LLM budget"):
        await llm.chat([{"role": "user", "content": "hi"}], scope="telegram:1")
    await llm.chat([{"role": "user", "content": "hi"}], scope="telegram:2")
    await llm.close()


async def test_other_refusals_are_one_clear_llm_error(openai_server):
    openai_server.responder = lambda body: Raw(404, {"error": {"message": "model m does not exist"}})
    llm = make(openai_server)
    with pytest.raises(LLMError, match=r"refused the request \(HTTP 404: model m does not exist\): "
                                       r"check \[llm\] model") as caught:
        await llm.chat([{"role": "user", "content": "hi"}])
    assert "{" not in str(caught.value) and openai_server.base_url in str(caught.value)
    assert len(openai_server.requests) == 1  # not retried
    await llm.close()


def test_strict_schema_keeps_properties_named_like_keywords():
    from engine.llm.schema import strict_schema

    class Item(BaseModel):
        title: str
        examples: list[str] = []
        default: int = 3

    class Outer(BaseModel):
        items: list[Item]

    schema = strict_schema(Outer)
    item = schema["$defs"]["Item"]
    assert set(item["properties"]) == set(item["required"]) == {"title", "examples", "default"}
    assert "default" not in item["properties"]["default"] and item["additionalProperties"] is False
    assert "title" not in schema and "title" not in item


async def test_a_bare_list_is_taken_for_the_wrapping_object(openai_server):
    class People(BaseModel):
        people: list[Person]

    openai_server.responder = lambda body: json.dumps([GOOD, GOOD])
    llm = make(openai_server)
    assert len((await llm.structured(People, [{"role": "user", "content": "who?"}])).people) == 2
    assert len(openai_server.requests) == 1
    await llm.close()
