"""/sim outcome in a server: who may record what really happened, the score posted when the report
agent's model (the fake endpoint) has scored the forecast, /sims with each score and the chat's
track record, /sim status with the outcome, and the daily digest with the forecasts newly scored."""
from __future__ import annotations

import pytest

from bot.app import App
from bot.neutral import Incoming
from bot.scheduler import build_digest
from engine.config import parse_config
from engine.sim import records
from tests.fakes.outcome_responder import OutcomeResponder
from tests.helpers.chat import Outlet, RecordingReply
from tests.helpers.ensemble_data import camp, ran_simulation
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401

SCOPE, CHANNEL = "discord:1", "c1"


@pytest.fixture
async def app(tmp_path, openai_server, db_url):  # noqa: F811
    config = parse_config({"bot": {"data_dir": str(tmp_path / "data")}, "database": {"url": db_url},
                           "llm": {"base_url": openai_server.base_url, "model": "m", "retry_max_wait_s": 0.05},
                           "jobs": {"progress_interval_s": 0}}, str(tmp_path / "config.toml"))
    app = await App.create(config, ["bot.features.core", "bot.features.simulation"])
    app.channel = RecordingReply()
    app.adapters.add(Outlet("discord", lambda scope, channel: app.channel))
    await app.start()
    yield app
    await app.close()


async def say(app, who: str, text: str, admin: bool = False) -> str:
    reply = RecordingReply()
    await app.dispatch(Incoming("discord", SCOPE, CHANNEL, who, who, text, is_admin=admin), reply)
    return "\n".join(t for _, t in reply.of("send"))


async def started_by(app, sim_id: str, who: str) -> None:
    """Record ``who`` as the person who started the simulation (the job that ran it)."""
    job = await app.jobs.submit("outcome", {"sim_id": "none"}, SCOPE, title="earlier", started_by=who)
    await app.jobs.wait(job.id)
    await records.set_job(app.db, sim_id, job.id)


async def test_the_starter_records_the_outcome_and_the_score_is_posted(app, openai_server, tmp_path,  # noqa: F811
                                                                       tmp_path_factory):
    openai_server.responder = OutcomeResponder()
    sim = await ran_simulation(app.db, app.config, tmp_path_factory, tmp_path, [camp(-0.6)], scope=SCOPE,
                               channel=CHANNEL)
    await started_by(app, sim.id, "starter")
    listed = await say(app, "someone", "/sims")
    assert "Track record: no forecast scored yet (/sim outcome <id> <what happened> scores one)." in listed

    refused = await say(app, "mallory", f"/sim outcome {sim.id} Nothing happened at all.")
    assert "only the person who started this simulation or" in refused and "may record its outcome" in refused
    assert "say what really happened" in await say(app, "starter", f"/sim outcome {sim.id}")
    assert await app.sims.outcome(sim.id) is None and not openai_server.requests

    answer = await say(app, "starter", f"/sim outcome {sim.id} The fare hike passed and ridership fell.")
    assert f"📌 Outcome of `{sim.id}` recorded: “The fare hike passed and ridership fell.”" in answer
    job = (await app.jobs.list(scope=SCOPE, kind="outcome"))[0]
    assert (await app.jobs.wait(job.id)).state == "done"
    posted = [t for _, t in app.channel.of("send") if t.startswith("🎯")]
    assert posted and posted[0].startswith(f"🎯 Forecast of `{sim.id}` scored 10/10")
    assert "[twitter post 1]" in posted[0] and "⚠ Unverified: [twitter post 999], round 42" in posted[0]

    listed = await say(app, "someone", "/sims")
    assert f"`{sim.id}` " in listed and " · scored 10/10 · " in listed
    assert "Track record: 1 forecast scored, mean 10.0/10." in listed
    status = await say(app, "someone", f"/sim status {sim.id}")
    assert "outcome: The fare hike passed and ridership fell. · scored 10/10" in status
    digest = await build_digest(app, SCOPE, "2000-01-01T00:00:00+00:00", CHANNEL)
    assert "Forecasts scored against what happened:" in digest
    assert f"• `{sim.id}` How will commuters react to the transit fare hike?: 10/10 (/sim status {sim.id})" in digest
    # an administrator may record it too; a simulation that has not run has nothing to score
    assert "📌 Outcome" in await say(app, "admin", f"/sim outcome {sim.id} It was withdrawn.", admin=True)
    sim_id, _ = await records.create(app.db, app.config, [], "What next?", SCOPE, CHANNEL)
    assert "has not run yet: there is no forecast to score" in await say(app, "admin", f"/sim outcome {sim_id} x",
                                                                            admin=True)


async def test_another_chat_neither_scores_nor_sees_the_score(app, openai_server, tmp_path,  # noqa: F811
                                                             tmp_path_factory):
    openai_server.responder = OutcomeResponder()
    sim = await ran_simulation(app.db, app.config, tmp_path_factory, tmp_path, [camp(0.6)], scope="discord:2",
                               channel="c9")
    assert f"no simulation {sim.id} here" in await say(app, "admin", f"/sim outcome {sim.id} It passed.", admin=True)
    assert await app.sims.outcome(sim.id) is None and not openai_server.requests
