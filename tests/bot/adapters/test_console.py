"""The console chat end to end: a real `python -m bot` process with piped stdin."""
import sqlite3
import subprocess

import pytest

from bot.cli import main
from engine.db import discover_migrations
from tests.conftest import REPO, bot_command, bot_env


def run_bot(tmp_path, stdin: str, *args: str, config_text: str = "", timeout: float = 120):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[bot]\ndata_dir = "data"\n{config_text}')
    return subprocess.run(bot_command("--config", str(cfg), *args), input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=bot_env())


def test_help_then_eof_lists_commands_and_exits_zero(tmp_path):
    out = run_bot(tmp_path, "/help\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:3] == [
        "Commands:", "[general]", "  /help [<command>] — List the commands, or explain one"]
    for name in ("/help", "/jobs", "/cancel", "/resume"):
        assert name in out.stdout


def test_errors_are_clear_and_the_session_goes_on(tmp_path):
    out = run_bot(tmp_path, "/nosuch\n/cancel\n/help cancel\n/cancel abc\n")
    assert out.returncode == 0, out.stderr
    lines = out.stdout
    assert "unknown command /nosuch" in lines
    assert "missing job. Usage: /cancel <job>" in lines
    assert "Cancel a running job" in lines
    assert "no job abc here" in lines


def test_the_console_speaks_the_language_chosen_for_it_and_bot_language_by_default(tmp_path):
    out = run_bot(tmp_path, "/jobs\n/settings language pt_BR\n/jobs\n/nosuch\n/settings language auto\n/jobs\n",
                  config_text='language = "th"\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-6:] == [
        "ยังไม่มีงาน",                                       # [bot] language
        "idioma definido: pt_BR (português (Brasil)).",      # said in the language just chosen
        "Nenhuma tarefa ainda.",
        "⚠ comando desconhecido /nosuch. Digite /help para ver a lista.",
        "ตั้งค่าภาษาแล้ว: auto",                              # auto: back to [bot] language
        "ยังไม่มีงาน"]


def test_db_current_prints_the_schema_version(tmp_path):
    latest = discover_migrations()[-1].version
    out = run_bot(tmp_path, "", "db", "current")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0")  # nothing applied yet: `current` does not upgrade
    out = run_bot(tmp_path, "", "db", "upgrade")
    assert f"schema version {latest}" in out.stdout
    out = run_bot(tmp_path, "", "db", "current")
    assert out.stdout.strip() == str(latest)


def test_newer_database_is_refused_with_a_clear_message(tmp_path):
    run_bot(tmp_path, "", "db", "upgrade")
    with sqlite3.connect(tmp_path / "data" / "bot.sqlite3") as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, 'future', 'now')")
    out = run_bot(tmp_path, "/help\n")
    assert out.returncode == 2
    assert "schema version 999, newer than this bot knows" in out.stderr
    assert "Traceback" not in out.stderr


def test_ask_shows_it_is_thinking_and_says_the_llm_is_down_in_one_sentence(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    out = run_bot(tmp_path, "the ferry leaves at nine\n/ask when does the ferry leave?\n",
                  config_text=f'[llm]\nbase_url = "{dead}"\n[memory]\nextract_every_s = 600\n')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    thinking = lines.index("… thinking")
    answer = next(i for i, line in enumerate(lines) if line.startswith("⚠ The LLM endpoint"))
    assert thinking < answer and "could not be reached after 2 tries" in lines[answer]
    assert "Error code" not in out.stdout and "{'error'" not in out.stdout and "Traceback" not in out.stderr


def test_bad_config_value_is_named(tmp_path):
    out = run_bot(tmp_path, "", config_text="[jobs]\nmax_concurrent = -1\n")
    assert out.returncode == 2
    assert "jobs.max_concurrent" in out.stderr and "Traceback" not in out.stderr


def test_every_cli_command_has_help(tmp_path, capsys):
    out = run_bot(tmp_path, "", "--help")  # as a user types it, in its own process
    assert out.returncode == 0 and "usage:" in out.stdout
    # the sub-commands' help through the same entry point, in this process (each process costs
    # the bot's imports, about 4 CPU seconds)
    for args in (["run", "--help"], ["db", "--help"], ["db", "current", "--help"]):
        with pytest.raises(SystemExit) as exited:
            main(["--config", str(tmp_path / "config.toml"), *args])
        assert exited.value.code == 0 and "usage:" in capsys.readouterr().out, args


def test_wait_extracts_the_beliefs_of_every_piped_message_before_it_exits(tmp_path):
    # 500 lines piped in at once: all stored and all read for beliefs before the process ends, while
    # the LLM client is still open (before, extraction ran after it closed and waited for the next start)
    from tests.engine.memory.test_extraction_batches import TOPICS, said_and_mentioned
    from tests.fakes.openai_server import FakeOpenAI
    lines = [f"{TOPICS[i % 4][(i // 4) % 5]} ({i})" for i in range(500)]
    with FakeOpenAI(said_and_mentioned) as server:
        out = run_bot(tmp_path, "".join(line + "\n" for line in lines), "run", "--wait", timeout=600,
                      config_text=f'log_level = "DEBUG"\n[llm]\nbase_url = "{server.base_url}"\n')
    assert out.returncode == 0, out.stderr[-3000:]
    assert "client has been closed" not in out.stderr and "extraction failed" not in out.stderr
    with sqlite3.connect(tmp_path / "data" / "bot.sqlite3") as con:
        stored, unread = con.execute("SELECT count(*), sum(extracted = 0) FROM memory_messages").fetchone()
        beliefs = con.execute("SELECT count(*) FROM beliefs").fetchone()[0]
    assert (stored, unread) == (500, 0)
    assert beliefs >= 500
