"""The report agent's tools against a real oasis run, a real local graph and the fake endpoint:
the panorama reads every fact of the graph, and interviewees are chosen by the LLM."""
from __future__ import annotations

import json

import pytest

from engine.config import LLMSection, MemorySection
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.sim.graph.store import GraphStore, NewEdge, NewEntity
from engine.sim.report.post_search import MemoryPostSearch
from engine.sim.report.sources import PersonaInterviewer, StoreGraph, load_roster
from engine.sim.report.stats import compute_stats
from engine.sim.report.tools import InterviewAgentsArgs, PanoramaSearchArgs, ReportTools, fitted
from tests.fakes.openai_server import completion
from tests.helpers.llm_fixtures import embedder, openai_server, sqlite_only  # noqa: F401
from tests.helpers.simdata import sample_simulation, write_environment, write_graph

pytestmark = sqlite_only


@pytest.fixture
def folder(tmp_path_factory, tmp_path):
    folder = sample_simulation(tmp_path_factory, tmp_path)
    write_environment(folder)
    return folder


@pytest.fixture
async def tools(folder, db, embedder, openai_server):  # noqa: F811
    store = await write_graph(db, "sim1", folder, embedder)
    memory = MemoryEngine(db, embedder, MemorySection())
    llm = LLMClient(LLMSection(base_url=openai_server.base_url, model="m", timeout_s=10, retry_max_wait_s=1))
    stats = compute_stats(folder)
    made = ReportTools(stats, StoreGraph(store, "sim1"), PersonaInterviewer(llm, folder), load_roster(folder), llm,
                       posts=MemoryPostSearch(memory, "sim1", folder, stats))
    made.store = store
    yield made
    await llm.close()
    await memory.close()


async def _many_facts(store: GraphStore, count: int) -> None:
    """The sample graph with ``count`` facts: the fare's price every month, each superseded by the next."""
    entities = [NewEntity("City Council", "Organization", "Sets the fares."),
                NewEntity("Transit fare", "Policy", "The price of a ride.")]
    edges = [NewEdge(0, 1, "sets_price", f"In month {m} a single ride costs {100 + m} cents.",
                     f"2020-{1 + m % 12:02d}-01", None if m == count - 1 else f"2020-{1 + (m + 1) % 12:02d}-01")
             for m in range(count)]
    await store.replace("sim1", entities, edges)


async def test_panorama_counts_every_fact_and_shows_whole_ones_as_far_as_the_result_holds(tools):
    await _many_facts(tools.store, 120)
    tools.result_chars = 100_000
    everything = await tools.panorama_search(PanoramaSearchArgs(query="single ride price"))
    assert everything["current"] == 1 and everything["superseded"] == 119
    # all of them, past the 50 of before
    assert everything["shown"] == len(everything["facts"]) == 120 and everything["not_shown"] == 0
    tools.result_chars = 6000
    text = await tools.call("panorama_search", '{"query": "single ride price"}')
    cut = json.loads(text)                                   # whole facts: the result is never cut mid-fact
    assert len(text) <= 6000 and 10 < cut["shown"] < 120 and cut["not_shown"] == 120 - cut["shown"]
    assert cut["current"] == 1 and cut["superseded"] == 119
    dates = [f["valid_at"] for f in cut["facts"]]
    assert dates == sorted(dates)                            # shown oldest first, to tell how it changed
    blank = await tools.panorama_search(PanoramaSearchArgs(query=" "))   # nothing to rank by: still every fact
    assert blank["current"] + blank["superseded"] == 120 and blank["shown"] == cut["shown"]


async def test_interviewees_their_reasons_and_questions_come_from_the_llm(tools, openai_server):  # noqa: F811
    def responder(body):
        if (body.get("response_format") or {}).get("json_schema", {}).get("name") == "InterviewPlan":
            assert "Will commuters keep riding?" in body["messages"][1]["content"]
            assert "@carol (Journalist, neutral" in body["messages"][1]["content"]
            return json.dumps({"picks": [
                {"username": "dave", "reason": "Dave opposes the hike and cycles instead.",
                 "question": "Dave, would a cheaper monthly pass bring you back to the bus?"},
                {"username": "@alice", "reason": "Alice speaks for the council that raised the fare.",
                 "question": "Alice, how many riders does the council expect to lose?"},
                {"username": "nobody", "reason": "Not an agent.", "question": "Who are you?"}]})
        return completion(f"In character: {body['messages'][-1]['content']}")
    openai_server.responder = responder
    got = await tools.interview_agents(InterviewAgentsArgs(question="Will commuters keep riding?", count=2))
    answers = {a["agent"]: a for a in got["answers"]}
    assert list(answers) == ["@dave", "@alice"]              # the LLM's choice, unknown names dropped
    assert answers["@dave"]["why_chosen"] == "Dave opposes the hike and cycles instead."
    assert answers["@dave"]["asked"] == "Dave, would a cheaper monthly pass bring you back to the bus?"
    assert answers["@dave"]["answer"] == "In character: Dave, would a cheaper monthly pass bring you back to the bus?"
    assert [q["question"] for q in tools.quotes] == ["Dave, would a cheaper monthly pass bring you back to the bus?",
                                                    "Alice, how many riders does the council expect to lose?"]


async def test_named_agents_are_asked_the_writers_question_and_an_unusable_choice_falls_back(tools, openai_server):  # noqa: F811
    openai_server.responder = lambda body: completion(
        "not json" if body.get("response_format") else "I take the bus.")
    named = await tools.interview_agents(InterviewAgentsArgs(question="Bus or bike?", agents=["@bob"]))
    assert [(a["agent"], "why_chosen" in a, "asked" in a) for a in named["answers"]] == [("@bob", False, False)]
    assert not any(r.get("response_format") for r in openai_server.requests)   # no choice to make
    chosen = await tools.interview_agents(InterviewAgentsArgs(question="How do cyclists see the fare hike?", count=1))
    assert [a["agent"] for a in chosen["answers"]] == ["@dave"]   # by keywords: dave is the cyclist


def test_a_result_longer_than_the_limit_is_still_json(db_url):   # no database: once, on SQLite
    answers = {"question": "why?", "answers": [{"agent": f"@a{i}", "answer": "x" * 900} for i in range(12)]}
    text = fitted(answers, 6000)
    short = json.loads(text)
    assert len(text) <= 6000 and short["question"] == "why?"
    assert 0 < len(short["answers"]) < 12 and short["cut_items"] == 12 - len(short["answers"])
    assert short["answers"] == answers["answers"][: len(short["answers"])]   # whole answers, first ones kept
    one_long_text = {"summary": "y" * 9000}
    text = fitted(one_long_text, 6000)
    assert len(text) <= 6000 and json.loads(text)["cut"] is True and json.loads(text)["text"].startswith('{"summary"')
    assert fitted({"ok": 1}, 6000) == '{"ok": 1}'
