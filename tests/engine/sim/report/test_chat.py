"""Report chat: /report <sim> ask <question> at the console, and replies to the report's messages
on Discord and Telegram, answered by the report agent through native tool calls against the
fake OpenAI endpoint, on the sample oasis run (tests/helpers/simdata.py) with a hand-written report."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from bot.adapters import discord_adapter, telegram_adapter
from bot.app import App
from engine.i18n import describe
from engine.sim.estimate import report_question
from engine.sim.report.chat import chat_job
from tests.fakes import telegram_server
from tests.fakes.discord_server import CHANNEL, GUILD
from tests.fakes.openai_server import Metered, Raw, completion
from tests.fakes.reportchat_responder import PERSONA_ANSWER, ReportChatResponder
from tests.helpers.chat import Outlet, RecordingReply, said, serving
from tests.helpers.discord import fake  # noqa: F401
from tests.helpers.llm_fixtures import fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import sim_app
from tests.helpers.simdata import NAMES, sample_simulation, write_environment, write_graph
from tests.helpers.telegram import fake_telegram  # noqa: F401

pytestmark = pytest.mark.timeout(180)
FEATURES = ["bot.features.core", "bot.features.simulation"]
QUESTION = "How did commuters react to the fare hike?"
BUDGET = 1_000_000


async def prepare(app: App, folder: Path, scope: str = "console:local", channel: str = "console",
                  starter: str = "u1") -> None:
    """Simulation sim1 of ``scope``, started by ``starter`` (an author id; who may have its agents
    interviewed): the sample run, its environment, graph and a written report."""
    write_environment(folder)
    await write_graph(app.db, "sim1", folder, app.embedder)
    await app.db.execute(
        "INSERT INTO jobs(id, kind, scope, channel, title, params, state, message, created_at, updated_at,"
        " started_by) VALUES ('job-sim1', 'simulation', ?, ?, 'simulation sim1', '{}', 'done', '', ?, ?, ?)",
        (scope, channel, "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00", starter))
    await app.db.execute("UPDATE simulations SET scope=?, channel=?, job_id='job-sim1' WHERE id='sim1'",
                         (scope, channel))
    out = folder / "report"
    out.mkdir()
    (out / "report.md").write_text(
        "# Fare hike: how commuters respond\n\n**Requirement:** How will commuters react to the transit fare "
        "hike?\n\n## Summary\n\nCommuters push back against the hike.\n\n## 1. Reactions\n\nThe council's hike "
        "[fact 1] led the engagement [twitter post 1]; a later post [twitter post 9] asked for a boycott.\n",
        encoding="utf-8")
    (out / "summary.txt").write_text("Commuters push back against the hike.", encoding="utf-8")
    (out / "report.json").write_text(json.dumps({"citations": ["[fact 1]", "[twitter post 1]", "[twitter post 9]"],
                                                 "unverified_citations": []}), encoding="utf-8")


def stances(rows: list[tuple[str, int, int, float]]) -> list[tuple]:
    labels = {1: "for", 0: "neutral", -1: "against"}
    return [("sim1", p, r, a, s, labels[(s > 0.2) - (s < -0.2)]) for p, r, a, s in rows]


async def add_stances(app: App, rows: list[tuple]) -> None:
    """Stances as the stance observer writes them."""
    await app.db.executemany("INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label)"
                             " VALUES (?,?,?,?,?,?)", rows)


async def make_app(tmp_path: Path, server, **sections) -> App:
    """An app with the simulation features on the fake LLM endpoint, a job's budget ``BUDGET``."""
    return await sim_app(tmp_path, server, llm={"job_budget_tokens": BUDGET}, **sections)


@pytest.fixture
async def app(tmp_path, openai_server, db_url):  # noqa: F811
    app = await make_app(tmp_path, openai_server, database={"url": db_url})
    app.adapters.add(Outlet("console", lambda scope, channel: RecordingReply()))
    await app.start()
    yield app
    await app.close()


@pytest.fixture
async def sim(app, tmp_path_factory, tmp_path):
    folder = sample_simulation(tmp_path_factory, tmp_path)
    await prepare(app, folder)
    return folder


def requests_of(server, after: int = 0) -> list[dict]:
    return [r for r in server.requests[after:] if r["messages"][0]["content"].startswith("You are the report agent")]


async def test_a_question_is_answered_with_tool_calls_and_cited_evidence(app, sim, openai_server):  # noqa: F811
    openai_server.responder = ReportChatResponder()
    reply = RecordingReply()
    await app.dispatch(said(f"/report sim1 ask {QUESTION}"), reply)
    (_, text), = reply.log

    first, last = requests_of(openai_server)
    # native tool calling with the report agent's tools and the belief series
    assert first["tool_choice"] == "auto" and last["tool_choice"] == "auto"
    assert {t["function"]["name"] for t in first["tools"]} == {
        "insight_forge", "panorama_search", "quick_search", "interview_agents", "simulation_statistics",
        "belief_series"}
    # the report itself is the agent's context; the question is the last turn
    assert "The report (report.md):\n# Fare hike: how commuters respond" in first["messages"][0]["content"]
    assert "The run: 6 agents on twitter, reddit, 3 rounds" in first["messages"][0]["content"]
    assert first["messages"][1:] == [{"role": "user", "content": QUESTION}]
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in last["messages"] if m["role"] == "tool"}
    assert results["b1"] == {"tracked": False,
                             "note": "not tracked: no agent's stance was classified in this simulation"}
    assert any("fare hike" in f["fact"] for f in results["q1"]["facts"])
    assert results["i1"]["answers"][0]["answer"] == PERSONA_ANSWER   # no live run: answered from the persona

    # the answer cites what the tools returned; a citation neither a tool nor the report gave is flagged
    fact = results["q1"]["facts"][0]
    assert text.startswith("💬 Report agent of `sim1`:\n")
    assert f"{fact['fact']} {fact['cite']}." in text
    assert "The most engaged post was [twitter post 1]." in text
    assert "Stances were not tracked in this run." in text
    assert f"[agent @bob] said: \"{PERSONA_ANSWER}\"" in text
    assert text.endswith("\n⚠ Unverified: [fact 999] (returned by no tool and not among the report's sources)")
    row = await app.db.fetchone("SELECT * FROM report_chat")
    assert (row["sim_id"], row["channel"], row["asked_by"], row["question"]) == ("sim1", "console", "console:u1",
                                                                                QUESTION)
    assert row["tool_calls"] == 4 and row["unverified"] == 1
    # every call is counted against the simulation's chat job and the scope
    usage = await app.db.fetchone("SELECT sum(calls) AS calls FROM llm_usage WHERE job=? AND scope='console:local'",
                                  (chat_job("sim1"),))
    assert usage["calls"] == 3   # two turns of the agent, one persona interview


async def test_earlier_questions_of_the_channel_and_the_belief_series_reach_the_agent(app, sim, openai_server):  # noqa: F811
    await add_stances(app, stances([("twitter", 1, 0, 0.1), ("twitter", 1, 1, -0.6), ("twitter", 2, 0, 0.5),
                                    ("twitter", 2, 1, -0.7), ("twitter", 2, 2, 0.9), ("reddit", 1, 3, 0.0)]))
    openai_server.responder = responder = ReportChatResponder()
    await app.dispatch(said(f"/report sim1 ask {QUESTION}"), RecordingReply())
    before = len(openai_server.requests)
    reply = RecordingReply()
    await app.dispatch(said("/report sim1 ask And the union?"), reply)
    (_, text), = reply.log

    first = requests_of(openai_server, before)[0]
    earlier = await app.db.fetchval("SELECT answer FROM report_chat WHERE question=?", (QUESTION,))
    assert first["messages"][1:] == [{"role": "user", "content": QUESTION},
                                     {"role": "assistant", "content": earlier},
                                     {"role": "user", "content": "And the union?"}]
    assert f"Following up on \"{QUESTION}\":" in text
    tool = next(json.loads(m["content"]) for r in requests_of(openai_server, before) for m in r["messages"]
                if m.get("tool_call_id") == "b1")
    assert tool["rounds"] == [
        {"platform": "reddit", "round": 1, "for": 0, "neutral": 1, "against": 0, "mean": 0.0},
        {"platform": "twitter", "round": 1, "for": 0, "neutral": 1, "against": 1, "mean": -0.25},
        {"platform": "twitter", "round": 2, "for": 2, "neutral": 0, "against": 1, "mean": 0.233}]
    assert "By round 2 on twitter, 2 agents were for and 1 against." in text

    # another channel has a conversation of its own
    other = said("/report sim1 ask What next?")
    other.channel = "elsewhere"
    await app.dispatch(other, RecordingReply())
    assert responder.questions[-1] == "What next?"
    assert requests_of(openai_server)[-1]["messages"][1]["content"] == "What next?"


@sqlite_only
async def test_what_cannot_be_answered_is_one_line_and_costs_no_request(app, sim, openai_server, tmp_path):  # noqa: F811
    openai_server.responder = ReportChatResponder()
    await write_graph(app.db, "sim2", tmp_path / "empty", app.embedder)
    cases = {
        "/report nosuch ask why?": "⚠ no simulation nosuch here. /sims lists them.",
        "/report sim2 ask why?": "⚠ simulation sim2 has no report yet: /report sim2 writes it; ask once it is posted.",
        "/report sim1 ask": "⚠ ask what? Usage: /report sim1 ask <question…>",
        "/report sim1 tell me": "⚠ action must be one of ask, export",
        "/report sim1 ask " + "why " * 600: "⚠ the question is 2,399 characters long; ask in at most 2,000.",
    }
    for command, line in cases.items():
        reply = RecordingReply()
        await app.dispatch(said(command), reply)
        assert reply.log == [("send", line)], command
    # a budget reached: one line, before any request
    await app.llm.usage.record("m", BUDGET, 0, chat_job("sim1"), "console:local")
    reply = RecordingReply()
    await app.dispatch(said(f"/report sim1 ask {QUESTION}"), reply)
    assert reply.log == [("send", f"⚠ no answer about `sim1`: this job reached its LLM budget ({BUDGET:,} of "
                                  f"{BUDGET:,} tokens); raise llm.job_budget_tokens to let it continue")]
    assert openai_server.requests == []
    calls, tokens = report_question(app.config)   # /help report says what a question costs
    assert f"about {calls} LLM calls, {tokens:,} tokens" in next(describe(a.description)
                                                               for a in app.commands.get("report").args
                                                               if a.name == "question")


@sqlite_only
async def test_the_estimate_of_a_question_is_within_30_percent_of_one_asked(app, sim, openai_server):  # noqa: F811
    report = sim / "report" / "report.md"   # a report as long as the prompt takes, and a full history
    report.write_text(report.read_text() + "\n## 2. Details\n\n" + "Riders weighed bikes against buses. " * 300)
    openai_server.responder = Metered(ReportChatResponder())
    for i in range(app.config.report.chat_history):
        await app.dispatch(said(f"/report sim1 ask {QUESTION} ({i})"), RecordingReply())
    before = len(openai_server.requests)
    ledger = app.llm.usage
    used = await ledger.for_job(chat_job("sim1"))
    await app.dispatch(said(f"/report sim1 ask {QUESTION}"), RecordingReply())
    after = await ledger.for_job(chat_job("sim1"))
    calls, tokens = report_question(app.config)
    assert after.calls - used.calls == calls == len(openai_server.requests) - before
    assert abs((after.tokens - used.tokens) - tokens) <= 0.3 * tokens, (after.tokens - used.tokens, tokens)


async def test_an_endpoint_without_tool_calling_answers_from_the_report(app, sim, openai_server):  # noqa: F811
    def no_tools(body):
        if body.get("tools"):
            return Raw(400, {"error": {"message": "tools are not supported by this model"}})
        return "From the report: the council's hike [fact 1] led the engagement [twitter post 1]."
    openai_server.responder = no_tools
    reply = RecordingReply()
    await app.dispatch(said(f"/report sim1 ask {QUESTION}"), reply)
    # the report's own sources count as verified: nothing is flagged
    assert reply.log == [("send", "💬 Report agent of `sim1`:\nFrom the report: the council's hike [fact 1] led the "
                                  "engagement [twitter post 1].")]
    refused, answered = openai_server.requests
    assert refused["tools"] and "tools" not in answered
    assert "The report (report.md):" in answered["messages"][0]["content"]


PERSONA = "taking part in a social-media simulation"


class Greedy:
    """A report agent that wants everything: every agent interviewed, more tool calls each turn."""

    def __init__(self):
        self.tool_requests: list[dict] = []

    def __call__(self, body):
        system = body["messages"][0].get("content") or ""
        if PERSONA in system:
            return PERSONA_ANSWER
        if body.get("tool_choice") == "none":
            return "Commuters pushed back [agent @bob]."
        self.tool_requests.append(body)
        turn = len(self.tool_requests)
        return completion(tool_calls=[
            {"id": f"i{turn}", "name": "interview_agents",
             "arguments": {"question": "Will you keep taking the bus?",
                           "agents": NAMES}},
            {"id": f"q{turn}", "name": "quick_search", "arguments": {"query": "fare hike"}}])


def persona_requests(server) -> int:
    return sum(PERSONA in (r["messages"][0].get("content") or "") for r in server.requests)


async def test_a_question_interviews_at_most_the_cap_and_stops_calling_tools_at_theirs(tmp_path, tmp_path_factory,
                                                                                        openai_server):  # noqa: F811
    app = await make_app(tmp_path, openai_server, report={"chat_max_interviewed": 2, "chat_max_tool_calls": 3,
                                                          "chat_max_tool_turns": 5})
    await app.start()
    try:
        await prepare(app, sample_simulation(tmp_path_factory, tmp_path))
        openai_server.responder = agent = Greedy()
        reply = RecordingReply()
        await app.dispatch(said(f"/report sim1 ask {QUESTION}"), reply)
        assert reply.log == [("send", "💬 Report agent of `sim1`:\nCommuters pushed back [agent @bob].")]
        assert persona_requests(openai_server) == 2   # six agents named, two interviewed
        first, second = agent.tool_requests       # the third call ended the tools: the next turn answered
        results = {m["tool_call_id"]: json.loads(m["content"]) for m in openai_server.requests[-1]["messages"]
                   if m["role"] == "tool"}
        assert len(results["i1"]["answers"]) == 2
        assert results["i1"]["not_interviewed"] == "4 more agents: at most 2 are interviewed per question"
        assert results["i2"] == {"error": "this question's interviews are used up (2 agents at most); answer from "
                                          "what you have"}
        assert results["q2"] == {"error": "no more tool calls for this question (3 at most); answer from what "
                                          "you found"}
        assert openai_server.requests[-1]["tool_choice"] == "none"
        assert await app.db.fetchval("SELECT tool_calls FROM report_chat") == 3
        # usage is the asker's: per-person caps read it
        assert await app.db.fetchval("SELECT sum(calls) FROM llm_usage WHERE spender = 'console:u1'") == \
            len(openai_server.requests)
    finally:
        await app.close()


@sqlite_only
async def test_only_who_may_interview_makes_the_report_agent_interview(app, sim, openai_server):  # noqa: F811
    openai_server.responder = agent = Greedy()
    member = said(f"/report sim1 ask {QUESTION}")
    member.author_id = "u2"   # neither the simulation's starter (u1) nor an administrator
    await app.dispatch(member, RecordingReply())
    tools = {t["function"]["name"] for t in agent.tool_requests[0]["tools"]}
    assert "interview_agents" not in tools and "quick_search" in tools
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in openai_server.requests[-1]["messages"]
               if m["role"] == "tool"}
    assert results["i1"] == {"error": "only the person who started this simulation or an administrator may have "
                                      "its agents interviewed; answer without interviews"}
    assert persona_requests(openai_server) == 0
    admin = said(f"/report sim1 ask {QUESTION}")
    admin.author_id, admin.is_admin = "u3", True
    await app.dispatch(admin, RecordingReply())
    assert persona_requests(openai_server) > 0


# -- replies to the report on Discord and Telegram ------------------------------------------------

async def report_posted(app: App, messages: int) -> None:
    """Wait until the bot noted the ids of ``messages`` report messages (once the last is posted)."""
    for _ in range(200):
        if await app.db.fetchval("SELECT count(*) FROM report_messages") == messages:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the report's messages were not noted")


async def test_a_reply_to_the_report_on_discord_asks_its_agent(tmp_path, tmp_path_factory, monkeypatch, fake,
                                                              openai_server, db_url):  # noqa: F811
    openai_server.responder = responder = ReportChatResponder()
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    app = await make_app(tmp_path, openai_server, database={"url": db_url}, discord={
        "token_env": "DISCORD_TEST_TOKEN", "api_base": fake.api_base, "gateway_url": fake.gateway_url,
        "message_content": True})
    await prepare(app, sample_simulation(tmp_path_factory, tmp_path), f"discord:{GUILD}", CHANNEL, starter="6000")
    async with serving(app, discord_adapter.DiscordAdapter):
        await asyncio.wait_for(fake.identified.wait(), 10)
        for _ in range(100):  # the adapter knows the server's channels once the guild arrived
            if app.reply_to(f"discord:{GUILD}", CHANNEL) is not None:
                break
            await asyncio.sleep(0.05)
        await fake.interaction("report", [{"name": "sim", "type": 3, "value": "sim1"}])
        summary = await fake.wait_for("POST", "/webhooks/", lambda c: c.content.startswith("📊 Report"))
        await report_posted(app, 2)   # the summary and the file
        posted = next(m for m in fake.messages.values() if m["content"] == summary.content)
        await fake.message(QUESTION, reply_to=posted["id"])
        await fake.wait_for("POST", f"/channels/{CHANNEL}/typing")
        answer = await fake.wait_for("POST", f"/channels/{CHANNEL}/messages",
                                     lambda c: c.content.startswith("💬 Report agent of `sim1`"))
        assert "[agent @bob] said" in answer.content
        # a reply to the answer is a follow-up, with the first exchange in its prompt
        await report_posted(app, 3)
        posted = next(m for m in fake.messages.values() if m["content"] == answer.content)
        await fake.message("And the union?", reply_to=posted["id"])
        await fake.wait_for("POST", f"/channels/{CHANNEL}/messages",
                            lambda c: f"Following up on \"{QUESTION}\"" in c.content)
        # a reply to anything else asks nothing (messages are handed over in order: once the
        # next question is answered, the one before it was handled)
        await fake.message("nice weather", reply_to=fake.next_id())
        await fake.message("What next?", reply_to=posted["id"])
        await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: sum(
            x.content.startswith("💬 Report agent") for x in fake.calls) == 3)
        assert responder.questions == [QUESTION, "And the union?", "What next?"]


async def test_a_reply_to_the_report_on_telegram_asks_its_agent(tmp_path, tmp_path_factory, fake_telegram,
                                                               openai_server, db_url):  # noqa: F811
    openai_server.responder = ReportChatResponder()
    server = fake_telegram
    app = await make_app(tmp_path, openai_server, database={"url": db_url}, telegram={
        "token_env": "TG_TEST_TOKEN", "base_url": server.base_url, "base_file_url": server.base_file_url,
        "poll_timeout_s": 1})
    chat = -100
    await prepare(app, sample_simulation(tmp_path_factory, tmp_path), f"telegram:{chat}", str(chat),
                  starter=str(telegram_server.USER_ID))
    async with serving(app, telegram_adapter.TelegramAdapter, stop_within=20):
        await server.wait_for("setMyCommands")
        server.push_message(chat, "/report sim1")
        await report_posted(app, 2)   # the summary and the file
        summary_id = next(mid for (c, mid), text in server.texts.items() if text.startswith("📊 Report"))
        replied = {"message_id": summary_id, "date": int(time.time()), "from": telegram_server.BOT_USER,
                   "chat": {"id": chat, "type": "supergroup", "title": "Group"}, "text": "📊 Report"}
        server.push_message(chat, QUESTION, reply_to=replied)
        await server.wait_for("sendChatAction")
        answer = await server.wait_for("sendMessage", lambda c: "Report agent of" in c.params["text"])
        assert "[agent @bob] said" in answer.params["text"]
        assert await app.db.fetchval("SELECT count(*) FROM report_chat WHERE scope=?", (f"telegram:{chat}",)) == 1
