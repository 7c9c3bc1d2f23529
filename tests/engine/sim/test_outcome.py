"""Outcomes: what really happened recorded, the forecast scored against it by the report agent's
model (the fake endpoint), per run and overall, its citations checked, stored on both backends,
and the track record of a chat as its viewers see it."""
from __future__ import annotations

from dataclasses import replace

import pytest

from engine.jobs import JobError
from engine.llm import LLMClient
from engine.memory.audience import Viewer
from engine.sim import outcome
from engine.sim.ensemble.members import ran
from tests.fakes.outcome_responder import OutcomeResponder
from tests.helpers.ensemble_data import camp, ran_simulation
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401

VIEWER = Viewer("console:local")


@pytest.fixture
async def llm(db, config, openai_server):  # noqa: F811
    config.llm.base_url, config.llm.retry_max_wait_s = openai_server.base_url, 0.05
    client = LLMClient(config.llm, db)
    yield client
    await client.close()


async def test_a_forecast_is_scored_against_what_happened(db, config, llm, openai_server, tmp_path,  # noqa: F811
                                                          tmp_path_factory):
    responder = OutcomeResponder()
    openai_server.responder = responder
    sim = await ran_simulation(db, config, tmp_path_factory, tmp_path, [camp(-0.6)])
    with pytest.raises(JobError, match="has no recorded outcome"):
        await outcome.score(db, llm, sim, await ran(db, sim))
    kept = await outcome.record(db, sim.id, "  The fare hike passed,\n and ridership fell by a tenth. ", "console:u1")
    assert kept == "The fare hike passed, and ridership fell by a tenth."
    assert (await outcome.get(db, sim.id)).scoring is None
    assert await outcome.track_record(db, VIEWER) == outcome.TrackRecord(0, None)

    scoring = await outcome.score(db, llm, sim, await ran(db, sim), job="j1", scope="console:local")
    # the first answer cited nothing: asked again, once
    assert len(responder.prompts) == 2
    prompt = responder.prompts[0]
    assert "What really happened: The fare hike passed, and ridership fell by a tenth." in prompt
    assert "Run 1:" in prompt and "round 1 0/0/6 -0.60" in prompt and "ended: most agents against in round 3" in prompt
    assert "- [twitter post 1] @alice (round 1, engagement" in prompt
    assert openai_server.requests[-1]["messages"][0]["content"].endswith("Answer in English.")
    # a simulation in Portuguese is scored in Portuguese (its verdict is shown to its chat)
    in_portuguese = replace(sim, spec=replace(sim.spec, language="pt-BR"))
    system = outcome._messages(in_portuguese, kept, "", "", [])[0]["content"]
    assert system.endswith("Answer in Brazilian Portuguese.")
    # clamped to the scale, the run it does not have dropped, unverified citations marked and listed
    assert (scoring.score, scoring.scale) == (10, 10)
    assert scoring.runs == [{"run": 1, "score": 8, "reason": "Run 1 ended as things did."}]
    assert scoring.right == ["The opposition it showed from round 1 held, as [twitter post 1] put it."]
    assert scoring.wrong == ["It expected a vote in round 42 ⚠ unverified that never came, citing "
                             "[twitter post 999] ⚠ unverified."]
    assert scoring.unverified == ["[twitter post 999]", "round 42"]
    assert "[twitter post 1]" in scoring.cited and "round 1" in scoring.cited
    text = scoring.describe(sim.id)
    assert text.startswith(f"🎯 Forecast of `{sim.id}` scored 10/10 (0-10: 0 = wrong on everything that mattered")
    assert "✅ Right:\n• The opposition" in text and "❌ Wrong:" in text and "Per run" not in text
    assert "⚠ Unverified: [twitter post 999], round 42" in text

    stored = await outcome.get(db, sim.id)
    assert stored.scoring == scoring and stored.recorded_by == "console:u1" and stored.scored_at
    assert await outcome.track_record(db, VIEWER) == outcome.TrackRecord(1, 10.0)
    assert await outcome.scored_since(db, VIEWER, "2000-01-01") == [(sim.id, sim.requirement, 10.0)]
    # another chat, or a channel whose audience cannot read it, sees none of it
    assert await outcome.track_record(db, Viewer("discord:9")) == outcome.TrackRecord(0, None)
    private = await ran_simulation(db, config, tmp_path_factory, tmp_path, [camp(0.6)], audience="staff-room")
    await outcome.record(db, private.id, "The hike passed.", "console:u1")
    await outcome.score(db, llm, private, await ran(db, private))
    assert await outcome.scored_since(db, VIEWER, "2000-01-01") == [(sim.id, sim.requirement, 10.0)]
    assert await outcome.track_record(db, VIEWER) == outcome.TrackRecord(1, 10.0)
    assert len(await outcome.scored_since(db, Viewer("console:local", "staff-room"), "2000-01-01")) == 2
    # a new outcome replaces the old one and waits for its own score
    await outcome.record(db, sim.id, "The hike was withdrawn.", "console:u2")
    again = await outcome.get(db, sim.id)
    assert (again.outcome, again.scoring, again.scored_at) == ("The hike was withdrawn.", None, None)
    assert await outcome.track_record(db, VIEWER) == outcome.TrackRecord(0, None)
    with pytest.raises(JobError, match="the outcome is empty"):
        await outcome.record(db, sim.id, "   ", "x")
    with pytest.raises(JobError, match="at most 2,000"):
        await outcome.record(db, sim.id, "x" * 2001, "x")


async def test_an_ensemble_is_scored_run_by_run(db, config, llm, openai_server, tmp_path,  # noqa: F811
                                                tmp_path_factory):
    responder = OutcomeResponder(uncited_first=False)
    openai_server.responder = responder
    sim = await ran_simulation(db, config, tmp_path_factory, tmp_path, [camp(-0.6), camp(0.6), camp(-0.5)])
    await outcome.record(db, sim.id, "The hike passed against loud opposition.", "console:u1")
    scoring = await outcome.score(db, llm, sim, await ran(db, sim), confidence="2 of 3 runs: most agents against")
    prompt = responder.prompts[0]
    assert [f"Run {k}:" in prompt for k in (1, 2, 3)] == [True] * 3
    assert "Across the 3 runs: 2 of 3 runs: most agents against" in prompt
    assert "- [run 2 twitter post 1] @alice" in prompt and "ended: most agents for in round 3" in prompt
    assert [r["run"] for r in scoring.runs] == [1, 2, 3] and scoring.runs[1]["score"] == 9
    assert "[run 1 twitter post 1]" in scoring.right[0] and "⚠" not in scoring.right[0]
    assert "Per run: run 1 8/10" in scoring.describe(sim.id)
    # an ensemble's runs are no simulations of their own in the track record
    assert await outcome.track_record(db, VIEWER) == outcome.TrackRecord(1, 10.0)
