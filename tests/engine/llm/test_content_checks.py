"""Answers checked for meaning, not only shape (content_checks through LLMClient.structured), and
LLM failures told in one human sentence, fast while a person waits."""
from __future__ import annotations

import json
import socket
import time

import pytest
from pydantic import BaseModel

from engine.config import LLMSection
from engine.llm import InvalidAnswer, LLMClient, LLMError
from engine.llm.client import person_waiting
from engine.llm.content_checks import ContentChecks, name_in, text_problem
from tests.fakes.openai_server import Raw
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401


class Card(BaseModel):
    name: str
    bio: str


class Cards(BaseModel):
    cards: list[Card]


SOURCE = "Teresa Okafor leads the Dockworkers Union. Valmora Logistics runs the port."
CHECKS = ContentChecks(texts=("cards[].bio",), names=("cards[].name",), source=SOURCE, items=("cards",))


def make(server, **overrides) -> LLMClient:
    cfg = LLMSection(base_url=server.base_url, model="m", timeout_s=5, retry_max_wait_s=0.05, **overrides)
    return LLMClient(cfg)


@pytest.mark.parametrize("text", ["Organizatio ...oops Organizat ...oops", "N/A", "string", "TODO", "...",
                                  "", "  ", "Union leader who fights for the docks and…",
                                  "Runs the Organization of dock workers in the Organiz"])
def test_junk_text_is_named(text):
    assert text_problem(text) is not None


@pytest.mark.parametrize("text", ["Union leader in Valmora.", "Port operator, automation advocate",
                                  "Says the strike will end soon! Maybe not.", "#SaveValmoraDocks"])
def test_real_text_passes(text):
    assert text_problem(text) is None


def test_names_must_occur_in_the_source():
    assert name_in("Teresa Okafor", SOURCE) and name_in("the Dockworkers Union", SOURCE)
    assert name_in("Okafor, Teresa", SOURCE)          # every word occurs
    assert not name_in("Organizat", SOURCE) and not name_in("John Smith", SOURCE)


async def test_repaired_junk_is_asked_again_with_the_problem(openai_server):
    answers = iter([json.dumps({"cards": [{"name": "Teresa Okafor", "bio": "Organizatio ...oops"}]}),
                    json.dumps({"cards": [{"name": "Teresa Okafor", "bio": "Union leader in Valmora."}]})])
    openai_server.responder = lambda body: next(answers)
    llm = make(openai_server)
    got = await llm.structured(Cards, [{"role": "user", "content": SOURCE}], checks=CHECKS)
    assert got.cards[0].bio == "Union leader in Valmora."
    retry = openai_server.requests[1]["messages"][-1]["content"]
    assert "cards[0].bio" in retry and "junk" in retry
    await llm.close()


async def test_a_bad_item_fails_alone_after_the_retries(openai_server):
    bad = {"cards": [{"name": "Teresa Okafor", "bio": "Union leader."}, {"name": "John Smith", "bio": "N/A"},
                     {"name": "Valmora Logistics", "bio": "Runs the port."}]}
    openai_server.responder = lambda body: json.dumps(bad)
    llm = make(openai_server, validation_retries=1)
    got = await llm.structured(Cards, [{"role": "user", "content": SOURCE}], checks=CHECKS)
    assert [c.name for c in got.cards] == ["Teresa Okafor", "Valmora Logistics"]
    assert len(openai_server.requests) == 2
    await llm.close()


async def test_an_answer_cut_inside_a_text_is_not_accepted(openai_server):
    cut = '{"cards": [{"name": "Teresa Okafor", "bio": "Leads the union and speaks for the dockw'
    openai_server.responder = lambda body: cut
    llm = make(openai_server, validation_retries=1)
    with pytest.raises(InvalidAnswer, match="cut off"):
        await llm.structured(Cards, [{"role": "user", "content": SOURCE}])
    await llm.close()


@pytest.mark.parametrize("title", ["#/$defs/SectionPlan", "SectionPlan", "section_plan", "Title",
                                   '{"type": "string"}', "see $ref"])
def test_a_schema_fragment_or_name_echoed_as_content_is_named(title):
    # seen from a real llama.cpp server with a tiny model: a report section titled "#/$defs/SectionPlan"
    from engine.sim.report.agent import OUTLINE_CHECKS, Outline
    outline = Outline(title="What the strike did to the port",
                      sections=[{"title": title, "focus": "How the dockworkers reacted"}])
    problems = OUTLINE_CHECKS.problems(outline)
    assert [p.path for p in problems] == ["sections[0].title"], problems
    assert "schema" in problems[0].message


def test_real_titles_that_share_a_word_with_the_schema_pass():
    from engine.sim.report.agent import OUTLINE_CHECKS, Outline
    outline = Outline(title="Where the focus of the debate moved",
                      sections=[{"title": "A plan for the sections of the port", "focus": "Who changed their mind"}])
    assert OUTLINE_CHECKS.problems(outline) == []


async def test_a_schema_fragment_anywhere_in_an_answer_is_asked_again(openai_server):
    # undeclared fields are checked too: every step's answer, whatever its checks declare
    answers = iter([json.dumps({"cards": [{"name": "Teresa Okafor", "bio": "Union leader.", }],
                                "note": "#/properties/cards"}),
                    json.dumps({"cards": [{"name": "Teresa Okafor", "bio": "Union leader."}]})])

    class Noted(Cards):
        note: str = ""

    openai_server.responder = lambda body: next(answers)
    llm = make(openai_server)
    got = await llm.structured(Noted, [{"role": "user", "content": SOURCE}], checks=CHECKS)
    assert got.note == "" and len(openai_server.requests) == 2
    assert "note" in openai_server.requests[1]["messages"][-1]["content"]
    await llm.close()


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


async def test_a_dead_endpoint_is_one_sentence_and_fast_while_a_person_waits():
    llm = LLMClient(LLMSection(base_url=_dead_url(), model="m", max_retries=5, retry_max_wait_s=60))
    started = time.monotonic()
    with person_waiting(), pytest.raises(LLMError) as caught:
        await llm.chat([{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 5
    text = str(caught.value)
    assert text.startswith(f"The LLM endpoint {llm.base_url} could not be reached after 2 tries")
    assert "[llm] base_url" in text and "{" not in text
    await llm.close()


async def test_a_500_is_told_without_the_raw_body(openai_server):
    openai_server.responder = lambda body: Raw(500, {"error": {"message": "model crashed", "type": "server_error"}})
    llm = make(openai_server, max_retries=4)
    with person_waiting(), pytest.raises(LLMError) as caught:
        await llm.chat([{"role": "user", "content": "hi"}])
    assert len(openai_server.requests) == 2   # interactive_retries = 1
    assert str(caught.value) == (f"The LLM endpoint {openai_server.base_url} kept failing after 2 tries "
                                 "(HTTP 500: model crashed): check that the server is healthy and read its log.")
    await llm.close()


def test_placeholder_attribute_values_are_left_out_of_the_graph():
    from engine.sim.graph.step import Extraction, collect_nodes
    from engine.sim.ontology import normalise

    ex = Extraction.model_validate({"entities": [{"name": "Teresa Okafor", "type": "Person", "attributes": [
        {"name": "role", "value": "N/A"}, {"name": "union", "value": "Dockworkers Union"}]}]})
    (node,) = collect_nodes([(0, ex)], normalise(None)).values()
    assert node.attributes == {"union": "Dockworkers Union"}


async def test_an_entity_the_chunk_does_not_name_is_dropped_not_the_chunk(openai_server):
    from engine.sim.graph.step import CHECKS as EXTRACTION_CHECKS, Extraction

    answer = {"entities": [{"name": "Teresa Okafor", "type": "Person", "summary": "Leads the union."},
                           {"name": "Organizat ...oops", "type": "Organization", "summary": ""}],
              "relations": [{"source": "Teresa Okafor", "relation": "LEADS", "target": "Dockworkers Union",
                             "fact": "Teresa Okafor leads the Dockworkers Union."}]}
    openai_server.responder = lambda body: json.dumps(answer)
    llm = make(openai_server)
    got = await llm.structured(Extraction, [{"role": "user", "content": SOURCE}],
                               checks=EXTRACTION_CHECKS.for_source(SOURCE))
    assert [e.name for e in got.entities] == ["Teresa Okafor"] and len(got.relations) == 1
    assert len(openai_server.requests) == 3   # asked again twice with the problem first
    assert "names 'Organizat ...oops'" in openai_server.requests[1]["messages"][-1]["content"]
    await llm.close()


async def test_a_cut_off_last_item_fails_alone(openai_server):
    cut = ('{"cards": [{"name": "Teresa Okafor", "bio": "Union leader in Valmora."}, '
           '{"name": "Valmora Logistics", "bio": "Runs the port."}, {"name": "Valm')
    openai_server.responder = lambda body: cut
    llm = make(openai_server, validation_retries=1)
    got = await llm.structured(Cards, [{"role": "user", "content": SOURCE}], checks=CHECKS)
    assert [c.name for c in got.cards] == ["Teresa Okafor", "Valmora Logistics"]
    assert "cards.2.bio: Field required" in openai_server.requests[1]["messages"][-1]["content"]
    await llm.close()
