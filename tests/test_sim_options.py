"""/simulate's options are checked before anything is asked or started: caps and clamps are shown
in the confirmation, bad counts and unknown options are refused at once, in the chat (console)
and in the CLI (a subprocess)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.openai_server import Raw
from tests.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401

SAMPLE = Path(__file__).parent / "data" / "harbour_strike.md"


def write_config(tmp_path, server) -> Path:
    path = tmp_path / "config.toml"
    # every simulation asks for /confirm (an unpriced model above 1 token)
    path.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{server.base_url}"\nretry_max_wait_s = 0.05\n'
                    f'[simulation]\nconfirm_above_tokens = 1\n')
    return path


async def test_chat_shows_clamps_and_refuses_bad_or_unknown_options_before_confirm(openai_server, embedder,
                                                                                   tmp_path, capsys):
    app = await App.create(load_config(write_config(tmp_path, openai_server)),
                           ["bot.features.core", "bot.features.llm", "bot.features.simulation"])
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --agents 100000 --rounds 500")
        out = capsys.readouterr().out
        assert "50 agents at most, 72 rounds" in out and "/confirm " in out
        assert "agents capped at 50 (asked 100,000; [simulation] max_agents)" in out
        assert "rounds capped at 72 (asked 500; [simulation] max_rounds)" in out

        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --agents -1")
        out = capsys.readouterr().out
        assert "the number of agents must be at least 1 (got -1)" in out and "/confirm" not in out

        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --bogus 3")
        out = capsys.readouterr().out
        assert "unknown option --bogus; /simulate takes --agents, --rounds" in out and "/confirm" not in out
        assert await app.jobs.list() == [] and not openai_server.requests
    finally:
        await app.close()


def run_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(bot_command("--config", str(tmp_path / "config.toml"), "simulate", str(SAMPLE),
                                      "-r", "How will the strike end?", *args),
                          cwd=REPO, env=bot_env(), capture_output=True, text=True, timeout=120)


def test_cli_shows_clamps_and_refuses_bad_or_unknown_options(openai_server, tmp_path):
    write_config(tmp_path, openai_server)
    refused = run_cli(tmp_path, "--agents", "-1")
    assert refused.returncode == 2 and "the number of agents must be at least 1 (got -1)" in refused.stderr
    unknown = run_cli(tmp_path, "--bogus", "3")
    assert unknown.returncode == 2 and "--bogus" in unknown.stderr and "--agents" in unknown.stderr
    assert not openai_server.requests
    # a capped request says so before the run starts (here it fails at once: the key is refused)
    openai_server.responder = lambda body: Raw(401, {"error": {"message": "bad key"}})
    capped = run_cli(tmp_path, "--agents", "100000")
    assert capped.returncode == 1, capped.stderr
    assert "50 agents at most, 24 rounds; estimated about" in capped.stderr
    assert "note: agents capped at 50 (asked 100,000; [simulation] max_agents)" in capped.stderr
