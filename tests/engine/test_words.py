"""Words a user reads: counts agree with their nouns, a lone "/" is a hint rather than a
remembered message (the console through a pipe, as a user types)."""
from __future__ import annotations

import subprocess

from engine.i18n import using
from engine.words import plural
from tests.conftest import bot_command, bot_env
from tests.helpers.bot_process import stored


def test_plural_agrees_with_the_number():
    assert plural(1, "{n} message", "{n} messages") == "1 message"
    assert plural(0, "{n} round", "{n} rounds") == "0 rounds"
    assert plural(2, "{n} entity", "{n} entities") == "2 entities"
    assert plural(12_500, "{n} token", "{n} tokens") == "12,500 tokens"
    assert plural(1.0, "{n} hour", "{n} hours") == "1 hour" and plural(1.5, "{n} hour", "{n} hours") == "1.5 hours"


def test_plural_forms_per_language():
    # Portuguese: one form for 0 and 1, thousands separated by a dot; Thai: one form for every count
    with using("pt_BR"):
        assert plural(1, "{n} message", "{n} messages") == "1 mensagem"
        assert plural(0, "{n} message", "{n} messages") == "0 mensagem"
        assert plural(2, "{n} message", "{n} messages") == "2 mensagens"
        assert plural(12_500, "{n} token", "{n} tokens") == "12.500 tokens"
    with using("th"):
        assert plural(1, "{n} message", "{n} messages") == plural(5, "{n} message", "{n} messages").replace("5", "1")
        assert plural(5, "{n} message", "{n} messages") == "5 ข้อความ"


def test_lone_slash_is_a_hint_and_counts_read_right_at_the_console(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[bot]\ndata_dir = "data"\n')
    lines = "/\n/ recall\nI am training for the Berlin marathon next spring\n/worlds\n"
    out = subprocess.run(bot_command("--config", str(cfg)), input=lines, capture_output=True, text=True,
                         timeout=180, cwd=tmp_path, env=bot_env())
    assert out.returncode == 0, out.stderr
    hint = "a command goes right after the slash, like /help (which lists them all); nothing was remembered"
    assert out.stdout.count(hint) == 2, out.stdout
    assert [row[3] for row in stored(tmp_path / "data" / "bot.sqlite3")] == [
        "I am training for the Berlin marathon next spring"]
    assert "1 world, most recently active first:" in out.stdout
    assert "· 1 message · 0 beliefs" in out.stdout
    assert "1 worlds" not in out.stdout and "1 messages" not in out.stdout


def test_a_huge_search_is_refused_in_one_line(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[bot]\ndata_dir = "data"\n')
    huge = "marathon " * 6000   # 54,000 characters: SQLite's LIKE refused it with a traceback
    lines = f"I am training for the Berlin marathon\n/world {huge}\n/recall {huge}\n/world marathon\n"
    out = subprocess.run(bot_command("--config", str(cfg)), input=lines, capture_output=True, text=True,
                         timeout=180, cwd=tmp_path, env=bot_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("that is 53,999 characters; a search takes at most 2,000.") == 2
    assert "Traceback" not in out.stdout + out.stderr and "OperationalError" not in out.stdout + out.stderr
    assert "failed" not in out.stdout
    assert "No beliefs extracted yet. Its latest messages:" in out.stdout   # a short name still finds the world
    assert "I am training for the Berlin marathon" in out.stdout.split("Its latest messages:")[1]
