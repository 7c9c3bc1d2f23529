"""/interview when the run's agents cannot be reached: the answers are role-played from the
personas by the real openai client against the fake server, and each says so."""
from __future__ import annotations

import json

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from engine.sim.report.sources import PERSONA_LABEL
from tests.fakes.openai_server import SocialResponder
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import make_sim_folder

FEATURES = ["bot.features.core", "bot.features.simulation"]


async def test_interview_falls_back_to_personas_with_a_label(openai_server, tmp_path, capsys):  # noqa: F811
    openai_server.responder = SocialResponder()
    path = tmp_path / "config.toml"
    path.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{openai_server.base_url}"\n')
    app = await App.create(load_config(path), FEATURES)
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        folder = tmp_path / "sim"
        make_sim_folder(folder, agents=4, rounds=2, sim_id="f1")  # prepared, but its databases are gone
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('f1', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "toll?"}), str(folder)))
        await app.db.execute("INSERT INTO sim_runs(sim_id, folder, status, rounds_total, started_at, updated_at)"
                             " VALUES ('f1', ?, 'completed', 2, 'x', 'x')", (str(folder),))
        await console.handle_line("/interview f1 ben,cleo Was the toll fair? --platform reddit")
        out = capsys.readouterr().out
        assert "cannot be asked: simulation f1 has no databases to reopen" in out
        assert f"• @ben [reddit, agent 1] ({PERSONA_LABEL}): My view on 'Was the toll fair?'" in out
        assert f"• @cleo [reddit, agent 2] ({PERSONA_LABEL}):" in out
        personas = [r for r in openai_server.requests if r["messages"][0]["content"].startswith("You are")]
        assert len(personas) == 2 and "Ben" in personas[0]["messages"][0]["content"]
        # role-played answers are not the agents' own: none is recorded as an interview
        assert await app.db.fetchval("SELECT count(*) FROM sim_interviews") == 0
        assert await app.db.fetchval("SELECT sum(calls) FROM llm_usage WHERE scope = 'console:local'") == 2
    finally:
        await app.close()
