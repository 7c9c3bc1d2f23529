"""/compare and /report <sim> export at the console bot, and `python -m bot report-export` as a
subprocess, on the runs of tests/helpers/compare_data and the fake OpenAI endpoint."""
from __future__ import annotations

import csv
import json
from argparse import Namespace

import pytest

from bot.cli.export import report_export
from engine.config import load_config
from engine.db import open_database
from tests.bot.features.simulation.test_report import app  # noqa: F401
from tests.helpers.bot_process import run_cli
from tests.helpers.chat import RecordingReply, said
from tests.helpers.compare_data import STANCES_A, STANCES_B, two_runs, write_stances
from tests.helpers.llm_fixtures import fake_openai, openai_server, sqlite_only  # noqa: F401


async def add_sim(db, sim_id: str, folder, scope: str = "console:local") -> None:
    await db.execute("INSERT INTO simulations (id, scope, channel, requirement, spec, folder, created_at)"
                     " VALUES (?, ?, 'console', 'How will commuters react?', '{}', ?, '2026-12-01')",
                     (sim_id, scope, str(folder)))


@pytest.fixture
async def sims(app, tmp_path, tmp_path_factory):
    """The console bot of the report tests with runs A and B (stances tracked), another chat's
    simulation and one that has not run."""
    run_a, run_b = two_runs(tmp_path_factory, tmp_path)
    await add_sim(app.db, "simA", run_a)
    await add_sim(app.db, "simB", run_b)
    await add_sim(app.db, "simC", run_b, scope="telegram:42")
    await add_sim(app.db, "simD", tmp_path / "not-run")
    await write_stances(app.db, "simA", STANCES_A)
    await write_stances(app.db, "simB", STANCES_B)
    return app


async def test_compare_posts_summary_charts_and_file(sims, openai_server):  # noqa: F811
    app = sims
    openai_server.responder = lambda body: ("In B the news post [B twitter post 4] turned the mood, "
                                            "while A kept arguing over [A twitter post 2].")
    reply = app.reply
    await app.dispatch(said("/compare simA simB"), reply)
    assert reply.log[0][1].startswith("Comparing A `simA` with B `simB` (job `")
    job = (await app.jobs.list(scope="console:local", kind="compare"))[0]
    job = await app.jobs.wait(job.id)
    assert job.state == "done", job.error
    sent = [t for kind, t, *_ in reply.log if kind == "send"]
    assert any(t.startswith(f"⏳ compare simA simB (`{job.id}`)") for t in sent)    # progress in the channel
    summary = [t for t in sent if t.startswith("⚖ Comparison")]
    assert summary and "they part from round 2" in summary[0] and "[B twitter post 4]" in summary[0]
    images = reply.of("image")
    assert [p.name for _, p, _ in images] == ["activity.png", "beliefs.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for _, p, _ in images)
    (_, md, _), = reply.of("file")
    assert md.name == "compare.md" and "[A twitter post 2]" in md.read_text() and "[B twitter post 4]" in md.read_text()
    assert job.result["unverified"] == []
    usage = await app.db.fetchone("SELECT calls FROM llm_usage WHERE job = ?", (job.id,))
    assert usage["calls"] == 1


@pytest.mark.parametrize("line, answer", [
    ("/compare simA simA", "⚠ name two different simulations: a simulation compared with itself shows nothing."),
    ("/compare simA nosuch", "⚠ no simulation nosuch here. /sims lists them."),
    ("/compare simC simA", "⚠ no simulation simC here. /sims lists them."),          # another chat's
    ("/compare simA simD", "⚠ simulation simD has not run yet: there is nothing to compare."),
    ("/compare simA", "⚠ missing sim_b. Usage: /compare <sim_a> <sim_b>"),
])
@sqlite_only
async def test_compare_bad_input_is_one_line(sims, line, answer):
    app = sims
    reply = RecordingReply()
    await app.dispatch(said(line), reply)
    assert reply.log == [("send", answer)]
    assert await app.jobs.list(scope="console:local", kind="compare") == []


async def test_report_export_uploads_the_files(sims):
    app = sims
    reply = RecordingReply()
    await app.dispatch(said("/report simB export"), reply)
    assert reply.log[0][0] == "send" and "6 rows" in reply.log[0][1]
    files = [p for _, p, _ in reply.of("file")]
    assert [p.name for p in files] == ["trajectory.csv", "trajectory.jsonl", "transcript.md"]
    with files[0].open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["round"], r["platform"]) for r in rows][:2] == [("1", "twitter"), ("1", "reddit")]
    assert [json.loads(line)["round"] for line in files[1].read_text().splitlines()] == [1, 1, 2, 2, 3, 3]
    assert "injected event, asked by u1" in files[2].read_text()
    reply = RecordingReply()
    await app.dispatch(said("/report simD export"), reply)
    assert reply.log == [("send", "⚠ simulation simD has not run yet: there is nothing to export.")]


async def test_report_export_cli(tmp_path, tmp_path_factory, capsys):
    (tmp_path / "config.toml").write_text(f'[bot]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    _, run_b = two_runs(tmp_path_factory, tmp_path)
    db = await open_database(tmp_path / "data" / "bot.sqlite3")
    await add_sim(db, "simB", run_b)
    await add_sim(db, "simD", tmp_path / "not-run")
    await db.close()
    done = run_cli(tmp_path, "report-export", "simB", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "out" / n) for n in ("trajectory.csv", "trajectory.jsonl",
                                                                      "transcript.md")]
    with (tmp_path / "out" / "trajectory.csv").open(newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 6
    # bad input, in this process (one bot process start is enough): one line, exit 2, nothing written
    config = load_config(str(tmp_path / "config.toml"))
    for sim_id, error in (("nosuch", "error: no simulation nosuch"),
                          ("simD", "error: simulation simD has not run yet: there is nothing to export")):
        code = await report_export(Namespace(sim_id=sim_id, out=str(tmp_path / "bad")), config)
        assert (code, capsys.readouterr().err.strip()) == (2, error)
    assert not (tmp_path / "bad").exists()
