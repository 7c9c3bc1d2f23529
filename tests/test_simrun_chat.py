"""Step 4 as a pipeline step, driven by the chat commands through the console adapter."""
from __future__ import annotations

import json

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from engine.sim import pipeline
from tests.fakes.openai_server import SocialResponder
from tests.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.sim_fixture import make_sim_folder

FEATURES = ["bot.features.core", "bot.features.llm", "bot.features.simulation", "bot.features.simrun"]


async def test_run_step_after_prepared_steps_and_chat_control(openai_server, tmp_path, capsys):
    openai_server.responder = SocialResponder()
    path = tmp_path / "config.toml"
    path.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{openai_server.base_url}"\n'
                    f'[jobs]\nprogress_interval_s = 0.0\n[simulation]\nrun_idle_s = 120.0\n')
    app = await App.create(load_config(path), FEATURES)
    console = Console(app, interactive=False)
    await app.start()
    try:
        assert [name for name, _ in pipeline.STEPS][-1] == "run"
        # steps 1-3 are recorded as done: the pipeline goes straight to the run
        folder = tmp_path / "sim"
        make_sim_folder(folder, agents=6, rounds=3, sim_id="c1")
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('c1', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "toll?"}), str(folder)))
        for step in ("ontology", "graph", "environment"):
            await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('c1', ?, 'x')", (step,))
        await console.handle_line("/interview c1 all hello?")
        assert "has not reached its run yet" in capsys.readouterr().out
        job = await app.jobs.submit("simulation", {"sim_id": "c1"}, "console:local", channel="console")
        finished = await app.jobs.wait(job.id)
        assert finished.state == "done", finished.error
        run = finished.result["steps"]["run"]
        assert run["rounds"] == 3 and run["twitter actions"] > 0 and run["reddit actions"] > 0
        assert finished.result["llm_calls"] == 3 * 6 + 3 * 4  # the run's agent steps, counted as usage
        out = capsys.readouterr().out
        assert "round 3/3" in out  # the progress message followed the run

        await console.handle_line("/sim status c1")
        status = capsys.readouterr().out
        assert "4. run: done" in status and "run: idle: rounds" in status and "open for interviews" in status

        await console.handle_line("/interview c1 Ben,cleo What about the toll? --platform reddit")
        out = capsys.readouterr().out
        assert "• Ben [reddit, agent 1, after round 3]: My view on 'What about the toll?'" in out
        assert "• Cleo [reddit, agent 2" in out and "[twitter" not in out
        await console.handle_line("/interview c1 zed Hi?")
        assert "no agent 'zed'" in capsys.readouterr().out
        await console.handle_line("/sim resume c1")
        assert "has finished; there is nothing to resume" in capsys.readouterr().out
        assert await app.services["sim_runs"].release("c1")
        await console.handle_line("/sim stop c1")
        assert "is not running" in capsys.readouterr().out
        rows = await app.db.fetchall("SELECT agent_name FROM sim_interviews WHERE sim_id='c1' ORDER BY id")
        assert [r["agent_name"] for r in rows] == ["Ben", "Cleo"]
    finally:
        await app.close()
