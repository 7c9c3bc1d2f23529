"""/report in the chat and the report as a pipeline step, on a real oasis run and a fake LLM."""
from __future__ import annotations

import pytest

from bot.scheduler import build_digest
from engine.sim import records
from engine.sim.context import SimContext
from engine.sim.pipeline import run_pipeline
from engine.sim.report.step import step as report_step
from engine.sim.stance.tracking import label_of
from tests.engine.sim.report.test_agent import folder, scripted  # noqa: F401
from tests.helpers.chat import Outlet, RecordingReply, said
from tests.helpers.llm_fixtures import fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import sim_app
from tests.helpers.simdata import write_graph
from tests.helpers.wait import until


@pytest.fixture
async def app(tmp_path, openai_server, db_url):  # noqa: F811
    app = await sim_app(tmp_path, openai_server, db_url)
    reply = RecordingReply()
    app.adapters.add(Outlet("console", lambda scope, channel: reply))
    app.reply = reply
    await app.start()
    yield app
    await app.close()


async def ran(app, sim_id: str) -> None:
    """Record the simulation's run as done (its folder holds a real oasis run)."""
    await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES (?, 'run', 'x')", (sim_id,))


async def test_report_command_writes_then_posts_summary_charts_and_file(app, folder, openai_server):  # noqa: F811
    openai_server.responder = scripted
    await write_graph(app.db, "sim1", folder, app.embedder)
    await ran(app, "sim1")
    reply = app.reply
    await app.dispatch(said("/report sim1"), reply)
    assert "Writing the report of simulation `sim1`" in reply.of("send")[0][1]
    job = (await app.jobs.list(scope="console:local", kind="report"))[0]
    job = await app.jobs.wait(job.id)
    assert job.state == "done", job.error
    await until(lambda: reply.of("file"), 30, "the report posted after its job's final note")
    summary = [t for _, t in reply.of("send") if t.startswith("📊 Report of simulation `sim1`")]
    assert summary and "Commuters push back" in summary[0]
    images = reply.of("image")
    assert sorted(p.name for _, p, _ in images) == ["action_mix.png", "activity.png", "interactions.png",
                                                   "top_agents.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" and caption for _, p, caption in images)
    (_, report_file, caption), = reply.of("file")
    assert report_file == folder / "report" / "report.md" and "[twitter post 1]" in report_file.read_text()
    # the summary comes first, then the charts, then the file
    kinds = [e[0] for e in reply.log if e[0] in ("image", "file") or e[1] == summary[0]]
    assert kinds == ["send", "image", "image", "image", "image", "file"]

    # asked again: posted at once from the files, no LLM request
    before = len(openai_server.requests)
    again = RecordingReply()
    await app.dispatch(said("/report sim1"), again)
    assert len(openai_server.requests) == before
    assert [e[0] for e in again.log] == ["send", "image", "image", "image", "image", "file"]


@sqlite_only
async def test_report_command_refusals(app, folder, tmp_path):
    reply = RecordingReply()
    await app.dispatch(said("/report nosuch"), reply)
    assert reply.log == [("send", "⚠ no simulation nosuch here. /sims lists them.")]
    # a simulation that has not run: said at once, no job; a report job fails with a clear message
    await write_graph(app.db, "sim2", tmp_path / "empty", app.embedder)
    await app.dispatch(said("/report sim2"), reply)
    assert reply.log[-1] == ("send", "Simulation `sim2` has no report: its run never took place.")
    assert await app.jobs.list(kind="report") == []
    job = await app.sims.submit_report("sim2", "console:local", "console", "u1")
    job = await app.jobs.wait(job.id)
    assert job.state == "failed"
    assert job.error == "simulation sim2 has not finished its run yet: there is nothing to report"
    assert reply.of("file") == []
    # while the simulation's own job runs, its last step will write and post the report
    await app.db.execute("INSERT INTO jobs(id, kind, scope, title, state, created_at, updated_at)"
                         " VALUES ('pj1', 'simulation', 'console:local', 'simulation sim2', 'running', 'x', 'x')")
    await app.db.execute("UPDATE simulations SET job_id = 'pj1' WHERE id = 'sim2'")
    reply.log.clear()
    await app.dispatch(said("/report sim2"), reply)
    assert reply.log == [("send", "Simulation `sim2` is still under way (job `pj1`); its report is written at "
                                  "the end and posted in its channel.")]


@sqlite_only
async def test_report_as_a_pipeline_step(app, folder, openai_server):  # noqa: F811
    openai_server.responder = scripted
    await write_graph(app.db, "sim1", folder, app.embedder)
    await ran(app, "sim1")
    sim = await records.get(app.db, "sim1")
    ctx = SimContext("sim1", sim.folder, app.db, app.llm, app.embedder, sim.spec, app.config,
                     memory=app.sims.memory)
    results = await run_pipeline(ctx, [("report", report_step)])
    summary = results["report"]
    assert summary["report"] == str(folder / "report" / "report.md")
    assert summary["sections"] == 2 and summary["charts"] == 4 and summary["tool_calls"] == 5
    assert summary["unverified_citations"] == 1
    done = await records.completed_steps(app.db, "sim1")
    assert done["report"]["llm_calls"] > 0


@sqlite_only
async def test_a_simulation_ending_with_its_report_posts_it_in_its_channel(app, folder, openai_server):  # noqa: F811
    openai_server.responder = scripted
    await write_graph(app.db, "sim1", folder, app.embedder)
    for step in ("ontology", "graph", "environment", "run"):   # run already: the job goes to the report
        await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('sim1', ?, 'x')", (step,))
    job = await app.jobs.submit("simulation", {"sim_id": "sim1"}, "console:local", channel="console")
    job = await app.jobs.wait(job.id)
    assert job.state == "done", job.error
    assert job.result["steps"]["report"]["sections"] == 2
    await until(lambda: app.reply.of("file"), 30, "the report posted after its job's final note")
    assert [p.name for _, p, _ in app.reply.of("file")] == ["report.md"]
    assert len(app.reply.of("image")) == 4
    row = await app.db.fetchone("SELECT * FROM sim_reports WHERE sim_id = 'sim1'")
    assert row["path"] == str(folder / "report" / "report.md") and row["unverified"] == 1
    assert row["summary"].startswith("Commuters push back")
    digest = await build_digest(app, "console:local", "2000-01-01T00:00:00+00:00")
    assert f"(`{job.id}`) done — report: /report sim1" in digest


async def test_a_report_with_tracked_beliefs_has_their_section_and_posts_the_replay_last(app, folder,
                                                                                         openai_server):  # noqa: F811
    openai_server.responder = scripted
    await write_graph(app.db, "sim1", folder, app.embedder)
    await ran(app, "sim1")
    rows = [("sim1", "twitter", r, a, s, label_of(s)) for r in (1, 2) for a, s in ((0, 0.6), (1, -0.7 + 0.5 * r),
                                                                                   (2, 0.0))]
    await app.db.executemany("INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label)"
                             " VALUES (?,?,?,?,?,?)", rows)
    await app.dispatch(said("/report sim1"), app.reply)
    job = await app.jobs.wait((await app.jobs.list(scope="console:local", kind="report"))[0].id)
    assert job.state == "done", job.error
    await until(lambda: app.reply.of("file"), 30, "the report posted after its job's final note")
    uploads = [entry[1].name for entry in app.reply.log if entry[0] in ("image", "file")]
    assert uploads[-3:] == ["top_agents.png", "belief_replay.gif", "report.md"] and "beliefs.png" in uploads
    text = (folder / "report" / "report.md").read_text(encoding="utf-8")
    section = text.split("## Beliefs and run quality", 1)[1].split("\n## ", 1)[0]
    assert "| twitter | 1 | 1 | 2 | 0 |" in section and "| twitter | 2 | 2 | 1 | 0 |" in section
    assert "Participation:" in section and "**Health:" in section
    assert "![Belief replay, one frame per round](charts/belief_replay.gif)" in text
