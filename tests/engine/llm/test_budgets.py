"""What may be spent on the operator's LLM key (engine.llm.usage, engine.trust, engine.rates),
against the fake OpenAI endpoint on both backends: the bot's daily budget, a scope's token budget
for a model without a price, the smaller budget of a server the operator has not allowed, a
person's budget (owners have none), nothing at all in a stranger's direct message, memory's
work counted per scope and day instead of under one lifetime job, and the rate limit of costly
commands. Each refusal says which budget, when it resets and who lifts it."""
from __future__ import annotations

import time

import pytest

from engine.config import BotSection, LLMSection, ModelPrice
from engine.db import open_database
from engine.llm import BudgetExceeded, LLMClient
from engine.llm.usage import spending_as
from engine.rates import CostlyRate
from engine.trust import Trust
from tests.fakes.openai_server import completion
from tests.helpers.llm_fixtures import openai_server  # noqa: F401
from tests.helpers.memory import Chat, close_engine, open_engine

HI = [{"role": "user", "content": "hi"}]
OWNER = "telegram:42"
TRUST = Trust(BotSection(owner_ids=[OWNER], allowed_scopes=["discord:1"]))


def make(server, db, trust: Trust | None = TRUST, **caps) -> LLMClient:
    """A client with no caps but ``caps`` (the defaults' daily budgets turned off unless given)."""
    settings = {"daily_budget_usd": 0.0, "daily_budget_tokens": 0, "guest_budget_usd_per_day": 0.0,
                "guest_budget_tokens_per_day": 0, **caps}
    return LLMClient(LLMSection(base_url=server.base_url, model="m", retry_max_wait_s=0.1, **settings), db,
                     trust=trust)


async def spend_until_refused(llm: LLMClient, scope: str | None, most: int = 50) -> tuple[int, str]:
    """Requests for ``scope`` until one is refused: how many were answered, and the refusal."""
    for n in range(most):
        try:
            await llm.chat(HI, scope=scope)
        except BudgetExceeded as err:
            return n, str(err)
    raise AssertionError(f"{most} requests and no budget stopped them")


async def test_the_daily_budget_of_the_whole_bot_stops_every_scope_and_every_process(openai_server, db, db_url):  # noqa: F811
    openai_server.responder = lambda body: completion("ok", prompt_tokens=100, completion_tokens=0)
    llm = make(openai_server, db, daily_budget_tokens=500)
    for scope in ("discord:1", "telegram:-5", "telegram:42", "console:local"):   # allowed, guest, owner's, console
        await llm.chat(HI, scope=scope)
    answered, refusal = await spend_until_refused(llm, "discord:1")
    assert answered == 1 and len(openai_server.requests) == 5
    assert refusal.startswith("the bot (everyone together) reached today's LLM budget (500 of 500 tokens); it "
                              "resets at midnight UTC (in ")
    assert refusal.endswith("or the bot's operator raises [llm] daily_budget_tokens")
    with spending_as(OWNER):   # owners are spared per-person caps, not the bot's
        answered, _ = await spend_until_refused(llm, "console:local")
    assert answered == 0
    # another bot process on the same database knows what was spent today
    other_db = await open_database(db_url)
    other = make(openai_server, other_db, daily_budget_tokens=500)
    assert (await spend_until_refused(other, "telegram:-9"))[0] == 0
    assert len(openai_server.requests) == 5
    await llm.close()
    await other.close()
    await other_db.close()


async def test_a_scope_token_budget_holds_for_a_model_without_a_price(openai_server, db):  # noqa: F811
    openai_server.responder = lambda body: completion("ok", prompt_tokens=300, completion_tokens=100)
    llm = make(openai_server, db, scope_budget_usd_per_day=0.01, scope_budget_tokens_per_day=1000)
    assert "m" not in llm.config.prices   # dollars never add up for it: the token budget is what stops it
    answered, refusal = await spend_until_refused(llm, "discord:1")
    assert answered == 3
    assert refusal.startswith("this server or chat reached today's LLM budget (1,200 of 1,000 tokens); it resets "
                              "at midnight UTC")
    assert refusal.endswith("or the bot's operator raises [llm] scope_budget_tokens_per_day")
    await llm.chat(HI, scope="discord:2")   # another server has its own
    await llm.close()


async def test_a_server_the_operator_did_not_allow_gets_the_guest_budget(openai_server, db):  # noqa: F811
    openai_server.responder = lambda body: completion("ok", prompt_tokens=1000, completion_tokens=0)
    llm = make(openai_server, db, prices={"m": ModelPrice(input=10.0)}, guest_budget_usd_per_day=0.025,
               guest_budget_tokens_per_day=50_000)
    answered, refusal = await spend_until_refused(llm, "discord:777")   # a stranger's server: $0.01 a request
    assert answered == 3
    assert refusal.startswith("this server or chat reached today's LLM budget ($0.0300 of $0.0250); it resets at "
                              "midnight UTC (in ")
    assert refusal.endswith("or the bot's operator adds it to [bot] allowed_scopes (this server or chat is not on "
                            "the bot's allow-list)")
    # the allowed server, the console and an owner's direct message spend on under the normal budgets
    for scope in ("discord:1", "console:local", "telegram:42"):
        for _ in range(4):
            await llm.chat(HI, scope=scope)
    # a guest is told before work that needs more than it has left
    assert await llm.usage.short_of(None, "discord:1", 60_000, None) is None
    assert (await llm.usage.short_of(None, "discord:778", 60_000, None)).startswith(
        "that needs about 60,000 tokens, and this server or chat may spend only 50,000 tokens more today "
        "([llm] guest_budget_tokens_per_day is 50,000 tokens); it resets at midnight UTC")
    await llm.close()


async def test_a_person_has_a_daily_budget_that_owners_do_not(openai_server, db):  # noqa: F811
    openai_server.responder = lambda body: completion("ok", prompt_tokens=100, completion_tokens=0)
    llm = make(openai_server, db, user_budget_tokens_per_day=250)
    with spending_as("discord:5"):
        answered, refusal = await spend_until_refused(llm, "discord:1")
    assert answered == 3
    assert refusal.startswith("you reached today's LLM budget (300 of 250 tokens); it resets at midnight UTC")
    with spending_as("discord:6"):
        await llm.chat(HI, scope="discord:1")   # someone else in the same server
    with spending_as(OWNER):
        for _ in range(5):
            await llm.chat(HI, scope="discord:1")
    rows = await db.fetchall("SELECT spender, sum(calls) AS calls FROM llm_usage GROUP BY spender ORDER BY spender")
    assert [(r["spender"], r["calls"]) for r in rows] == [("discord:5", 3), ("discord:6", 1), (OWNER, 5)]
    await llm.close()


async def test_nothing_is_spent_in_a_strangers_direct_message(openai_server, db):  # noqa: F811
    llm = make(openai_server, db)
    for stranger in ("telegram:43", "discord:dm-43"):
        assert not llm.may_spend(stranger)
        with pytest.raises(BudgetExceeded, match="nothing is spent on the LLM in this direct message"):
            await llm.chat(HI, scope=stranger)
        assert await llm.usage.short_of(None, stranger, 1, None) is not None
    assert llm.may_spend("telegram:42") and llm.may_spend("telegram:-43") and llm.may_spend("discord:43")
    everyone = make(openai_server, db, trust=Trust(BotSection(dm_admins="everyone")),
                    guest_budget_tokens_per_day=100_000)
    await everyone.chat(HI, scope="telegram:43")   # then a stranger's DM is a guest
    assert len(openai_server.requests) == 1
    await llm.close()
    await everyone.close()


async def test_memory_spends_per_scope_and_day_not_under_one_lifetime_job(openai_server, db_url):  # noqa: F811
    openai_server.responder = lambda body: completion("The ferry leaves at nine [M1].", prompt_tokens=100,
                                                      completion_tokens=0)
    db, engine = await open_engine(db_url, extract_every_n=1000, extract_every_s=600, topic_delay_s=600)
    engine.llm = llm = make(openai_server, db, job_budget_tokens=150, scope_budget_tokens_per_day=250)
    try:
        for scope in ("discord:1", "discord:2"):
            chat = Chat(scope)
            await engine.ingest_many([chat.msg("the ferry leaves at nine from pier four")])
        # a job's budget (150 tokens) is not a cap on /ask shared by every server for ever
        for _ in range(3):
            assert (await engine.ask("discord:1", "when does the ferry leave?")).answer
        with pytest.raises(BudgetExceeded, match="^this server or chat reached today's LLM budget"):
            await engine.ask("discord:1", "when does the ferry leave?")
        assert (await engine.ask("discord:2", "when does the ferry leave?")).answer
        rows = await db.fetchall("SELECT job, scope, calls FROM llm_usage ORDER BY scope")
        assert [(r["job"], r["scope"], r["calls"]) for r in rows] == [("memory.ask", "discord:1", 3),
                                                                      ("memory.ask", "discord:2", 1)]
    finally:
        await llm.close()
        await close_engine(db, engine)


async def test_costly_commands_are_rate_limited_per_person_across_processes(db, db_url):
    rate = CostlyRate(db, per_hour=2)
    other_db = await open_database(db_url)
    other = CostlyRate(other_db, per_hour=2)   # another bot process on the same database
    try:
        assert await rate.take("telegram:1", "/ask") is None
        assert await other.take("telegram:1", "/simulate") is None
        wait = await rate.take("telegram:1", "/ask")
        assert wait is not None and 3590 < wait <= 3600
        assert await other.take("telegram:1", "/ask") is not None
        assert await rate.take("telegram:2", "/ask") is None   # someone else
        assert await db.fetchval("SELECT count(*) FROM costly_uses WHERE spender = 'telegram:1'") == 2
        # an hour later the oldest use has left the window
        await db.execute("UPDATE costly_uses SET at = at - 3500")
        await db.execute("UPDATE costly_uses SET at = ? WHERE command = '/simulate'", (time.time() - 3601,))
        assert await rate.take("telegram:1", "/ask") is None
        assert await CostlyRate(db, per_hour=0).take("telegram:1", "/ask") is None   # 0: no limit
    finally:
        await other_db.close()
