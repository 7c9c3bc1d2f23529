"""/simulate's options are checked before anything is asked or started: caps and clamps are shown
in the confirmation, bad counts and unknown options are refused at once, in the chat (console)
and in the CLI (a subprocess)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from bot.neutral import Attachment, Incoming
from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.openai_server import Raw
from tests.helpers.chat import RecordingReply
from tests.helpers.config import llm, write_config
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE, console_session


def confirming_config(tmp_path, server) -> Path:
    """Every simulation asks for /confirm (an unpriced model above 1 token); the daily budget is
    raised so that the largest request the caps allow (1,000 agents x 72 rounds) is not refused."""
    return write_config(tmp_path, {"llm": llm(server, daily_budget_tokens=10**9),
                                   "simulation": {"confirm_above_tokens": 1}})


async def test_chat_shows_clamps_and_refuses_bad_or_unknown_options_before_confirm(openai_server, embedder,
                                                                                   tmp_path, capsys):
    # the daily budget raised: the largest request the caps allow (1,000 agents x 72 rounds) is not refused
    async with console_session(tmp_path, llm(openai_server, daily_budget_tokens=10**9), steps=None,
                               confirm_above_tokens=1) as (app, console):
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --agents 100000 --rounds 500")
        out = capsys.readouterr().out
        assert "1,000 agents (the actors the documents name, then members of the public), 72 rounds" \
            in out and "/confirm " in out
        assert "agents capped at 1,000 (asked 100,000; [simulation] max_agents)" in out
        assert "rounds capped at 72 (asked 500; [simulation] max_rounds)" in out

        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --agents -1")
        out = capsys.readouterr().out
        assert "the number of agents must be at least 1 (got -1)" in out and "/confirm" not in out

        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --bogus 3")
        out = capsys.readouterr().out
        assert "unknown option --bogus; /simulate takes --agents, --rounds" in out and "/confirm" not in out
        assert await app.jobs.list() == [] and not openai_server.requests


def run_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(bot_command("--config", str(tmp_path / "config.toml"), "simulate", str(SAMPLE),
                                      "-r", "How will the strike end?", *args),
                          cwd=REPO, env=bot_env(), capture_output=True, text=True, timeout=120)


def test_cli_shows_clamps_and_refuses_bad_or_unknown_options(openai_server, tmp_path):
    confirming_config(tmp_path, openai_server)
    refused = run_cli(tmp_path, "--agents", "-1")
    assert refused.returncode == 2 and "the number of agents must be at least 1 (got -1)" in refused.stderr
    unknown = run_cli(tmp_path, "--bogus", "3")
    assert unknown.returncode == 2 and "--bogus" in unknown.stderr and "--agents" in unknown.stderr
    assert not openai_server.requests
    # a capped request says so before the run starts (here it fails at once: the key is refused)
    openai_server.responder = lambda body: Raw(401, {"error": {"message": "bad key"}})
    capped = run_cli(tmp_path, "--agents", "100000")
    assert capped.returncode == 1, capped.stderr
    assert "1,000 agents (the actors the documents name, then members of the public), 24 rounds; estimated about" \
        in capped.stderr
    assert "note: agents capped at 1,000 (asked 100,000; [simulation] max_agents)" in capped.stderr


async def test_runs_are_clamped_counted_against_the_caps_and_shown_before_confirm(openai_server, embedder,
                                                                                  tmp_path, capsys):
    async with console_session(tmp_path, llm(openai_server), steps=None, confirm_above_tokens=1, max_runs=4,
                               max_active_per_scope=6, max_active_per_user=3) as (app, console):
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --runs 3")
        out = capsys.readouterr().out
        assert "20 agents (the actors the documents name, then members of the public), 24 rounds, 3 runs) would " \
               "take about" in out and " for 3 runs (each run about " in out and "/confirm " in out
        # capped at 4 runs, which count as 4 simulations: over a server administrator's 3 (owners have no cap)
        reply = RecordingReply()
        await app.dispatch(Incoming("discord", "discord:1", "c1", "ann", "ann", "/simulate How will the "
                                    "strike end? --runs 9", attachments=[Attachment(SAMPLE.name, SAMPLE)],
                                    is_admin=True), reply)
        out = "\n".join(text for _, text in reply.of("send"))
        assert "this counts as 4 simulations and you may have at most 3 queued or running ([simulation] " \
               "max_active_per_user; 0 now)" in out and "/confirm" not in out, out
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --runs 0")
        assert "the number of runs must be at least 1 (got 0)" in capsys.readouterr().out
        assert await app.jobs.list() == [] and not openai_server.requests
async def test_chat_refuses_a_language_that_is_no_language_before_anything(openai_server, embedder, tmp_path,
                                                                          capsys):
    async with console_session(tmp_path, llm(openai_server), steps=None, confirm_above_tokens=1) as (app, console):
        await console.handle_line(f"/simulate {SAMPLE} How will the strike end? --lang klingon")
        out = capsys.readouterr().out
        assert "--lang klingon: not a language code; give one such as en, pt-BR or th" in out
        assert "/confirm" not in out and await app.jobs.list() == [] and not openai_server.requests


def test_cli_writes_in_the_requirements_language_or_the_one_asked(openai_server, tmp_path):
    confirming_config(tmp_path, openai_server)
    refused = run_cli(tmp_path, "--lang", "klingon")
    assert refused.returncode == 2 and "error: --lang klingon: not a language code" in refused.stderr
    assert not openai_server.requests
    openai_server.responder = lambda body: Raw(401, {"error": {"message": "bad key"}})   # fails once started
    chosen = run_cli(tmp_path, "--lang", "pt_br")
    assert "written in Brazilian Portuguese (pt-BR)" in chosen.stderr, chosen.stderr
    portuguese = subprocess.run(bot_command("--config", str(tmp_path / "config.toml"), "simulate", str(SAMPLE),
                                            "-r", "Como a greve no porto vai terminar na próxima semana?"),
                                cwd=REPO, env=bot_env(), capture_output=True, text=True, timeout=120)
    assert "written in Brazilian Portuguese (pt-BR)" in portuguese.stderr, portuguese.stderr
    english = run_cli(tmp_path)
    assert "written in English (en)" in english.stderr, english.stderr
