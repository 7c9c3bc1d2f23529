"""The simulation's entry points: `python -m bot simulate` and the chat commands through the
console adapter, against the fake endpoint."""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from bot.adapters.console import Console
from bot.app import App
from bot.cli import main
from engine.config import load_config, parse_config
from engine.sim import pipeline
from tests.fakes.openai_server import Raw
from tests.fakes.report_responder import PipelineResponder
from tests.fakes.sim_responder import SimResponder
from tests.helpers.config import llm, write_config
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE


def write_cli_config(tmp_path, server) -> Path:
    """The config of these tests and of tests/engine/sim/test_llm_misbehaving.py."""
    return write_config(tmp_path, {"llm": llm(server), "simulation": {"default_agents": 5}})


def test_cli_runs_all_five_steps_and_says_where_the_report_is(openai_server, embedder, tmp_path, capsys):
    responder = PipelineResponder()
    openai_server.responder = responder
    cfg = write_cli_config(tmp_path, openai_server)
    out_dir = tmp_path / "mysim"
    code = main(["--config", str(cfg), "simulate", str(SAMPLE), "--requirement", "What happens next?",
                 "--agents", "6", "--rounds", "3", "--out", str(out_dir)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "1/5 ontology" in captured.err and "4/5 run" in captured.err and "5/5 report" in captured.err
    assert "6 agents (the actors the documents name, then members of the public), 3 rounds; estimated about" \
        in captured.err   # before it starts
    assert "latest on" not in captured.err   # the bar keeps to one line (the chat shows the latest post)
    assert "cost unknown (no price for the model)" in captured.out and "$" not in captured.out
    assert f"report: {out_dir / 'report' / 'report.md'}" in captured.out
    assert f"charts: {out_dir / 'report' / 'charts'}" in captured.out
    config = json.loads((out_dir / "simulation_config.json").read_text())
    assert len(config["agents"]) == 6 and config["time"]["rounds"] == 3
    assert (out_dir / "documents" / SAMPLE.name).read_bytes() == SAMPLE.read_bytes()
    # the run: actions in both databases and both logs
    for platform in ("twitter", "reddit"):
        with sqlite3.connect(out_dir / platform / f"{platform}.db") as conn:
            assert conn.execute("SELECT count(*) FROM trace WHERE action NOT IN ('sign_up', 'refresh')").fetchone()[0]
        lines = [json.loads(x) for x in (out_dir / platform / "actions.jsonl").read_text().splitlines()]
        assert any(x["type"] == "action" for x in lines)
    # the report: sections citing the run's posts and agents, interviews of the live agents, charts
    report = (out_dir / "report" / "report.md").read_text()
    assert "## 1. How the discussion unfolded" in report and "## 2. What agents expect next" in report
    assert re.search(r"most engaged post was by @\w+ \[(twitter|reddit) post \d+\]", report)
    # the interview's question, as the LLM choosing interviewees wrote it for this agent
    assert re.search(r"\[agent @(\w+)\] said: \"My view on '@\1, what do you expect to happen next\?'", report)
    for chart in ("activity", "action_mix", "top_agents", "interactions"):
        assert f"(charts/{chart}.png)" in report and (out_dir / "report" / "charts" / f"{chart}.png").exists()
    assert responder.report.counts["persona"] == 0      # interviews went to the run's own agents
    assert responder.report.counts["outline"] == 1 and responder.report.counts["summary"] == 1


def test_cli_refuses_bad_input(openai_server, tmp_path, capsys):
    cfg = write_cli_config(tmp_path, openai_server)
    bad = tmp_path / "notes.xyz"
    bad.write_text("hello")
    assert main(["--config", str(cfg), "simulate", str(bad), "-r", "x"]) == 2
    assert "notes.xyz: unsupported file type" in capsys.readouterr().err
    assert main(["--config", str(cfg), "simulate", str(SAMPLE)]) == 2
    assert "--requirement" in capsys.readouterr().err
    used = tmp_path / "used"
    (used / "extraction").mkdir(parents=True)
    assert main(["--config", str(cfg), "simulate", str(SAMPLE), "-r", "x", "--out", str(used)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert not openai_server.requests


async def test_chat_commands_through_the_console(openai_server, embedder, tmp_path, capsys):
    openai_server.responder = SimResponder()
    config = load_config(write_cli_config(tmp_path, openai_server))
    app = await App.create(config, ["bot.features.core", "bot.features.simulation"])
    app.sims.steps = pipeline.STEPS[:3]  # steps 1-3 only: the run and the report have tests of their own
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        assert app.sims.llm is app.llm and app.sims.embedder is app.embedder
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --agents 3 --rounds 2")
        out = capsys.readouterr().out
        assert "Simulation `" in out, out
        sim_id = out.split("Simulation `", 1)[1].split("`", 1)[0]
        job_id = out.split("(job `", 1)[1].split("`", 1)[0]
        await console.handle_line("/sims")
        listed = capsys.readouterr().out
        assert f"`{sim_id}` " in listed and "/3 steps · How will the strike end?" in listed
        assert (await app.jobs.wait(job_id)).state == "done"
        await console.handle_line("/sims")
        assert f"`{sim_id}` done · 3/3 steps" in capsys.readouterr().out
        await console.handle_line(f"/sim status {sim_id}")
        status = capsys.readouterr().out
        assert "3. environment: done" in status and "LLM calls" in status and "agents 3" in status
        empty = tmp_path / "empty.md"
        empty.write_text("")
        await console.handle_line(f"/simulate {empty} what?")
        assert "⚠ empty.md: the file is empty" in capsys.readouterr().out
        await console.handle_line("/sim status nope")
        assert "no simulation nope" in capsys.readouterr().out
    finally:
        await app.close()


def test_cli_resume_continues_at_the_unfinished_step(openai_server, embedder, tmp_path, capsys):
    responder = PipelineResponder()
    broken = {"on": True}

    def respond(body):
        if broken["on"] and '"personas"' in json.dumps(body.get("response_format", {})):
            return Raw(401, {"error": {"message": "bad key"}})
        return responder(body)
    openai_server.responder = respond
    cfg = write_cli_config(tmp_path, openai_server)
    assert main(["--config", str(cfg), "simulate", str(SAMPLE), "-r", "What next?", "--agents", "3",
                 "--rounds", "2"]) == 1
    err = capsys.readouterr().err
    assert "refused the API key" in err and "--resume" in err
    sim_id = err.split("--resume ", 1)[1].split()[0]
    asked = dict(responder.sim.counts)

    broken["on"] = False
    assert main(["--config", str(cfg), "simulate", "--resume", sim_id]) == 0
    assert f"simulation {sim_id}" in capsys.readouterr().out
    assert responder.sim.counts["ontology"] == asked["ontology"] == 1
    assert responder.sim.counts["extraction"] == asked["extraction"]
    assert responder.sim.counts["personas"] == 1  # the failed batch, asked again once
    assert main(["--config", str(cfg), "simulate", "--resume", "nope"]) == 2


async def test_simulations_use_the_memory_embedder_built_from_the_config(tmp_path):
    config = parse_config({"bot": {"data_dir": str(tmp_path / "data")}, "embedder": {"backend": "torch"}},
                          str(tmp_path / "config.toml"))
    app = await App.create(config, ["bot.features.core", "bot.features.memory", "bot.features.simulation"])
    try:
        assert app.sims.embedder is app.memory.embedder is app.embedder
        assert app.embedder.backend == "torch"  # [embedder] backend honoured (it used to be ignored here)
        assert app.sims.graph.embedder is app.embedder
    finally:
        await app.close()
