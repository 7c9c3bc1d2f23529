"""The brief the LLM drafts from a requirement alone (engine.sim.seed.draft), against the fake
endpoint: a junk answer (placeholders, a field's name as its value, a piece of the schema, a
cut-off sentence) is asked again with its problems; a junk actor is dropped and the good ones
kept; too few actors, or junk that never mends, is refused in one line; the brief says it was
drafted, and its call is filed under its activity and the asking scope."""
from __future__ import annotations

import json

import pytest

from engine.config import LLMSection
from engine.db import open_database
from engine.jobs import JobError
from engine.llm import InvalidAnswer, LLMClient
from engine.sim.seed import draft
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.sim_responder import brief as good_brief

REQUIREMENT = "Will the Valmora dockworkers strike over the new cranes?"
SCOPE = "test:draft"
ASKED = {"messages": [{"role": "user", "content": f"What the simulation should predict: {REQUIREMENT}"}]}


def answers(*bodies: dict):
    """A responder giving these answers in turn (the last one again after them)."""
    given = list(bodies)

    def respond(_body):
        return json.dumps(given.pop(0) if len(given) > 1 else given[0])
    return respond


def junk() -> dict:
    bad = good_brief(ASKED)
    bad["title"] = "title"                                         # its own field's name
    bad["situation"] = "N/A"                                       # a placeholder
    bad["actors"][1]["position"] = "#/$defs/Actor"                 # a piece of the schema
    bad["actors"][2]["position"] = "The company's negotiator, looking for a negoti"   # cut off
    return bad


@pytest.fixture
async def llm(tmp_path):
    db = await open_database(tmp_path / "bot.db")
    with FakeOpenAI() as server:
        client = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", max_retries=0), db)
        yield client, server
        await client.close()
    await db.close()


async def test_junk_is_asked_again_with_its_problems_and_the_brief_says_it_was_drafted(llm):
    client, server = llm
    good = good_brief(ASKED)
    server.responder = answers(junk(), good)
    brief = await draft.draft(client, REQUIREMENT, SCOPE)
    assert len(server.requests) == 2
    retry = server.requests[1]["messages"][-1]["content"]
    assert "title is a name from the answer's schema" in retry and "situation is a placeholder" in retry
    assert "actors[1].position is a piece of the JSON schema" in retry
    assert "actors[2].position ends in a cut-off" in retry
    assert brief.origin == "drafted" and brief.body.startswith("# Valmora Port Faces a Strike Vote\n")
    assert f"Drafted by an LLM on {brief.built_at:%Y-%m-%d} from the question “{REQUIREMENT}”" in brief.body
    assert "- Maria Lopez (person): The company's negotiator, looking for a compromise." in brief.body
    assert "## Open questions\n\n- Will the union strike?" in brief.body
    assert brief.render() == brief.body
    usage = await client.usage.for_job(draft.ACTIVITY)
    assert usage.calls == 2


async def test_a_junk_actor_is_dropped_and_too_few_or_lasting_junk_is_refused(llm):
    client, server = llm
    some_bad = junk()
    some_bad["title"], some_bad["situation"] = "Valmora port", "The union meets the company on Monday."
    server.responder = answers(some_bad)      # two actors stay junk through every retry
    brief = await draft.draft(client, REQUIREMENT, SCOPE)
    assert "Harbor Logistics" not in brief.body and "Maria Lopez" not in brief.body
    assert "Dockworkers Union" in brief.body and "Valmora Council" in brief.body

    one_left = dict(some_bad, actors=some_bad["actors"][:3])
    server.responder = answers(one_left)
    with pytest.raises(JobError, match="1 usable actor.*at least 2"):
        await draft.draft(client, REQUIREMENT, SCOPE)

    server.responder = answers(junk())        # the situation never mends: no brief at all
    with pytest.raises(InvalidAnswer, match="no valid DraftedBrief"):
        await draft.draft(client, REQUIREMENT, SCOPE)


async def test_the_brief_is_asked_in_the_language_chosen_with_lang(llm):
    client, server = llm
    server.responder = answers(good_brief(ASKED))
    await draft.draft(client, REQUIREMENT, SCOPE)                 # the question's language: no rule added
    await draft.draft(client, REQUIREMENT, SCOPE, "pt-BR")
    systems = [r["messages"][0]["content"] for r in server.requests]
    assert "Answer in" not in systems[0] and systems[1].endswith("Answer in Brazilian Portuguese.")
