"""The report agent end to end against a fake OpenAI endpoint with the real openai client:
native tool calls run against a real oasis run and a real local graph, and report.md comes out
with cited sections and charts."""
from __future__ import annotations

import json
from typing import Any

import pytest

from engine.config import LLMSection, MemorySection, ReportSection
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.sim.report.agent import write_report
from engine.sim.report.post_search import MemoryPostSearch
from engine.sim.report.sources import PERSONA_LABEL, PersonaInterviewer, StoreGraph, load_roster
from engine.sim.report.stats import compute_stats
from engine.sim.report.tools import ReportTools, tool_schemas
from tests.fakes.openai_server import Raw, completion
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.simdata import sample_simulation, write_environment, write_graph

OUTLINE = {"title": "Fare hike: how commuters respond",
           "sections": [{"title": "Reactions on the platforms", "focus": "Who reacted to the hike and how"},
                        {"title": "How the facts changed", "focus": "What changed in prices and positions"}]}

SECTION_1 = [
    [{"id": "c1", "name": "insight_forge", "arguments": {"question": "How did commuters react to the fare hike?"}},
     {"id": "c2", "name": "simulation_statistics", "arguments": {"focus": "overview", "top": 3}}],
    [{"id": "c3", "name": "interview_agents",
      "arguments": {"question": "Will you keep taking the bus?", "agents": ["@bob"]}}],
    "The hike announced by the council [fact 1] drew the most engagement of the run: @alice's post "
    "[twitter post 1] got two likes and a repost, and [agent @bob] said he will cycle instead. "
    "The union's opposition [fact 2] framed the Reddit thread [reddit post 1]. An invented one: [fact 999].",
]
SECTION_2 = [
    [{"id": "d1", "name": "quick_search", "arguments": '{"query": "fare price", '}],   # broken JSON
    [{"id": "d2", "name": "panorama_search", "arguments": {"query": "single ride costs"}}],
    "A ride cost 2.00 euro [fact 4] until the hike; it now costs 2.40 euro [fact 5].",
]


def scripted(body: dict):
    fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    system = body["messages"][0]["content"]
    if fmt == "Outline":
        return json.dumps(OUTLINE)
    if fmt == "SubQueries":
        return json.dumps({"queries": ["fare hike reactions", "Commuters Union position"]})
    if body.get("tools"):
        script = SECTION_1 if "Write section 1" in body["messages"][1]["content"] else SECTION_2
        step: Any = script[sum(1 for m in body["messages"] if m["role"] == "assistant")]
        return step if isinstance(step, str) else completion(tool_calls=step)
    if system.startswith("You are"):
        return "Honestly, I will ride my bike from now on; the hike hurts commuters like me."
    if system.startswith("Summarise"):
        return "Commuters push back: the hike post led engagement and agents say they will switch to bikes."
    raise AssertionError(f"unexpected request: {system[:80]}")


def llm_for(server) -> LLMClient:
    return LLMClient(LLMSection(base_url=server.base_url, model="m", timeout_s=10, retry_max_wait_s=1))


@pytest.fixture
def folder(tmp_path_factory, tmp_path):
    folder = sample_simulation(tmp_path_factory, tmp_path)
    write_environment(folder)
    return folder


@pytest.fixture
async def graph(folder, db, embedder):  # noqa: F811
    return StoreGraph(await write_graph(db, "sim1", folder, embedder), "sim1")


@pytest.fixture
def sim(folder, graph):
    return folder


@pytest.fixture
async def memory(db, embedder):  # noqa: F811
    """The memory engine the report searches the simulation's posts with."""
    engine = MemoryEngine(db, embedder, MemorySection())
    yield engine
    await engine.close()


def tools_for(sim, graph, memory, llm) -> ReportTools:
    stats = compute_stats(sim)
    return ReportTools(stats, graph, PersonaInterviewer(llm, sim), load_roster(sim), llm,
                       posts=MemoryPostSearch(memory, "sim1", sim, stats))


async def test_report_with_native_tool_calls(sim, graph, memory, openai_server):  # noqa: F811
    openai_server.responder = scripted
    llm = llm_for(openai_server)
    seen = []

    async def progress(fraction, message):
        seen.append(message)

    result = await write_report(sim, llm, graph, PersonaInterviewer(llm, sim),
                                ReportSection(), memory=memory, progress=progress)
    await llm.close()
    reqs = openai_server.requests

    # the outline is one strict structured call; sections use native tools, not parsed text
    assert reqs[0]["response_format"]["type"] == "json_schema"
    tool_reqs = [r for r in reqs if r.get("tools")]
    assert len(tool_reqs) == 6
    assert {t["function"]["name"] for t in tool_reqs[0]["tools"]} == {
        "insight_forge", "panorama_search", "quick_search", "interview_agents", "simulation_statistics"}
    assert tool_reqs[0]["tool_choice"] == "auto"

    # the tool results that went back to the LLM hold the real data
    results = {m["tool_call_id"]: m["content"] for r in tool_reqs for m in r["messages"] if m["role"] == "tool"}
    forge = json.loads(results["c1"])
    assert forge["sub_queries"][1:] == ["fare hike reactions", "Commuters Union position"]
    assert any("20% transit fare hike" in f["fact"] for f in forge["facts"])
    assert "Commuters Union -opposes-> Transit fare <-raises- City Council [fact 2][fact 1]" in forge[
        "relation_chains"]
    assert {p["cite"] for p in forge["simulation_posts"]} >= {"[twitter post 1]", "[reddit post 1]"}
    stats = json.loads(results["c2"])
    assert stats["top_posts"][0] == {**stats["top_posts"][0], "cite": "[twitter post 1]", "likes": 2, "reposts": 1}
    assert stats["actions_by_round"]["reddit"] == {"0": 2, "1": 3, "2": 2}
    interview = json.loads(results["c3"])
    assert interview["answers"][0]["agent"] == "@bob" and "bike" in interview["answers"][0]["answer"]
    assert interview["answers"][0]["answered"] == PERSONA_LABEL  # role-played, and the writer is told so
    persona_req = next(r for r in reqs if r["messages"][0]["content"].startswith("You are Bob"))
    assert "I oppose the fare hike, it hurts commuters." in persona_req["messages"][0]["content"]
    assert json.loads(results["d1"])["error"].startswith("the arguments are not valid JSON")
    panorama = json.loads(results["d2"])
    statuses = {f["fact"]: f["status"] for f in panorama["facts"]}
    assert statuses["A single ride costs 2.00 euro."] == "superseded (invalid since 2026-01-10)"
    assert statuses["A single ride costs 2.40 euro after the hike."] == "current"

    # the report: cited sections, charts, sources, summary
    text = result.path.read_text(encoding="utf-8")
    assert result.path == sim / "report" / "report.md"
    assert "# Fare hike: how commuters respond" in text
    assert "## 1. Reactions on the platforms" in text and "## 2. How the facts changed" in text
    for name in ("activity", "action_mix", "top_agents", "interactions"):
        assert f"](charts/{name}.png)" in text
        assert (sim / "report" / "charts" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert result.citations[:4] == ["[fact 1]", "[twitter post 1]", "[agent @bob]", "[fact 2]"]
    assert result.unverified == ["[fact 999]"]
    assert "- [twitter post 1] @alice: The city council announced a 20% transit fare hike." in text
    assert "- [fact 999] (not returned by any tool)" in text
    assert "**@bob** on twitter, asked \"Will you keep taking the bus?\"" in text
    assert f"hurts commuters like me.\" ({PERSONA_LABEL})" in text
    assert f"- [agent @bob] @bob on twitter, answered {PERSONA_LABEL}" in text
    assert result.summary.startswith("Commuters push back")
    assert (sim / "report" / "summary.txt").read_text() == result.summary
    assert result.tool_calls == 5
    assert "writing section 2/2: How the facts changed" in seen


@sqlite_only
async def test_section_loop_stops_at_the_turn_cap(sim, graph, memory, openai_server):  # noqa: F811
    def endless(body):
        fmt = (body.get("response_format") or {}).get("json_schema", {}).get("name")
        if fmt == "Outline":
            return json.dumps(OUTLINE)
        if body.get("tools"):
            return completion(tool_calls=[{"name": "quick_search", "arguments": {"query": "fare"}}])
        return "summary"

    openai_server.responder = endless
    llm = llm_for(openai_server)
    result = await write_report(sim, llm, graph, PersonaInterviewer(llm, sim),
                                ReportSection(tool_turns=2), memory=memory)
    await llm.close()
    tool_reqs = [r for r in openai_server.requests if r.get("tools")]
    assert len(tool_reqs) == 2 * 3                   # per section: 2 turns with tools + the final one
    assert [r["tool_choice"] for r in tool_reqs] == ["auto", "auto", "none"] * 2
    assert result.tool_calls == 4                    # the final turn's calls are not run
    assert all(body == "_The writer gave no text for this section._" for _, body in result.sections)


async def test_resumed_report_writes_only_missing_sections(sim, graph, memory, openai_server):  # noqa: F811
    openai_server.responder = scripted
    llm = llm_for(openai_server)
    interviewer = PersonaInterviewer(llm, sim)
    await write_report(sim, llm, graph, interviewer, ReportSection(), memory=memory)
    (sim / "report" / "sections" / "02.md").unlink()
    (sim / "report" / "report.md").unlink()
    openai_server.requests.clear()
    result = await write_report(sim, llm, graph, interviewer, ReportSection(), memory=memory)
    await llm.close()
    tool_reqs = [r for r in openai_server.requests if r.get("tools")]
    assert all("Write section 2" in r["messages"][1]["content"] for r in tool_reqs) and len(tool_reqs) == 3
    assert not any(r.get("response_format") for r in openai_server.requests)   # outline kept
    assert "[fact 5]" in result.path.read_text()


@sqlite_only
async def test_bad_tool_calls_get_error_results(sim, graph, memory, openai_server):  # noqa: F811
    llm = llm_for(openai_server)
    tools = tools_for(sim, graph, memory, llm)
    assert "unknown tool 'drop_tables'" in json.loads(await tools.call("drop_tables", "{}"))["error"]
    assert "query: Input should be a valid string" in json.loads(await tools.call("quick_search", '{"query": 5}'))[
        "error"]
    assert "query: Field required" in json.loads(await tools.call("quick_search", '{"limit": 3}'))["error"]
    assert "query: Field required" in json.loads(await tools.call("panorama_search", '{"limit": 500}'))["error"]
    assert "not valid JSON" in json.loads(await tools.call("quick_search", "{query: fare"))["error"]
    missing = json.loads(await tools.call("interview_agents", '{"question": "hi", "agents": ["@nobody"]}'))
    assert missing["error"] == "no such agents: @nobody" and "@alice" in missing["known_agents"]
    assert [c.ok for c in tools.calls] == [False] * 6
    assert openai_server.requests == []     # nothing reached the LLM
    ok = json.loads(await tools.call("quick_search", '{"query": "fare hike"}'))
    assert ok["facts"][0]["cite"] in ("[fact 1]", "[fact 2]") and tools.calls[-1].ok
    await llm.close()


@sqlite_only
async def test_interviewees_are_chosen_by_relevance(sim, graph, memory, openai_server):  # noqa: F811
    openai_server.responder = lambda body: "I ride my bike."
    llm = llm_for(openai_server)
    tools = tools_for(sim, graph, memory, llm)
    out = json.loads(await tools.call("interview_agents", json.dumps(
        {"question": "As a cyclist, what do you think?", "count": 1})))
    assert [a["agent"] for a in out["answers"]] == ["@dave"]     # the only cyclist persona
    await llm.close()


def test_tool_schemas_are_valid_function_definitions():
    for tool in tool_schemas():
        fn = tool["function"]
        assert tool["type"] == "function" and fn["description"]
        assert fn["parameters"]["type"] == "object" and fn["parameters"]["properties"]
        assert set(fn["parameters"].get("required", [])) <= set(fn["parameters"]["properties"])
        json.dumps(tool)


@sqlite_only
async def test_an_endpoint_without_tool_calling_still_gets_a_cited_report(sim, graph, memory, openai_server):  # noqa: F811
    def no_tools(body):
        if body.get("tools"):
            return Raw(400, {"error": {"message": "tools are not supported by this model"}})
        if body["messages"][0]["content"].startswith("You write one section"):
            evidence = body["messages"][1]["content"]
            assert "[twitter post 1]" in evidence and "20% transit fare hike" in evidence
            return "The fare hike [fact 1] led the debate; see [twitter post 1]."
        return scripted(body)

    openai_server.responder = no_tools
    llm = llm_for(openai_server)
    result = await write_report(sim, llm, graph, PersonaInterviewer(llm, sim), ReportSection(), memory=memory)
    await llm.close()
    refused = [r for r in openai_server.requests if r.get("tools")]
    assert len(refused) == 1                      # asked once; the second section goes straight on
    assert [body for _, body in result.sections] == ["The fare hike [fact 1] led the debate; see "
                                                     "[twitter post 1]."] * 2
    assert result.unverified == [] and result.tool_calls == 6   # 3 tools per section, run by the agent
    assert "- [fact 1] The City Council announced a 20% transit fare hike." in result.path.read_text()


async def test_a_report_in_portuguese_asks_every_text_in_portuguese(sim, graph, memory, openai_server):  # noqa: F811
    """The simulation's language reaches every request of the report; a summary in English is
    asked again in Portuguese, and an interview answer still in English after that is kept."""
    section = "O aumento da tarifa [fact 1] dominou o debate; veja [twitter post 1]."
    resumo = "Os passageiros reagiram contra o aumento da tarifa e muitos dizem que vão de bicicleta."

    def portuguese(body):
        system, last = body["messages"][0]["content"], body["messages"][-1]["content"]
        if body.get("tools"):
            return Raw(400, {"error": {"message": "tools are not supported by this model"}})
        if system.startswith("You write one section"):
            return section
        if system.startswith("Summarise") and last.startswith("You wrote that in English."):
            return resumo
        return scripted(body)

    openai_server.responder = portuguese
    llm = llm_for(openai_server)
    result = await write_report(sim, llm, graph, PersonaInterviewer(llm, sim, lang="pt-BR"), ReportSection(),
                                memory=memory, lang="pt-BR")
    await llm.close()
    systems = [r["messages"][0]["content"] for r in openai_server.requests if not r.get("tools")]
    wanted = "Answer in Brazilian Portuguese."
    for start in ("Plan an analytical report", "You write one section", "Summarise", "You are"):
        asked = [s for s in systems if s.startswith(start)]
        assert asked and all(wanted in s for s in asked), start
    assert any("Write them in Brazilian Portuguese." in s for s in systems if s.startswith("Split the question"))
    corrections = [r["messages"][-1]["content"] for r in openai_server.requests
                   if r["messages"][-1]["content"].startswith("You wrote that in English.")]
    assert "Write the same answer in Brazilian Portuguese, nothing else." in corrections[0]
    interviews = [r for r in openai_server.requests if r["messages"][0]["content"].startswith("You are")]
    assert len(interviews) == 2 * 2 * 2   # two sections, two agents interviewed each, each asked once more
    assert result.summary == resumo and [b for _, b in result.sections] == [section] * 2
