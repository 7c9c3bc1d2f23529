"""The real bot in a subprocess (`python -m bot run`), polling a FakeTelegram of the caller.

Shared by the crash tests and bench/load.py (``run_cli`` runs one CLI command to its end): write a
config that points the Telegram adapter at the fake, start and kill the process, and read what
memory stored straight from SQLite (WAL: reading while the bot writes is safe).
``telegram_config(database=url)`` puts the bot on another database (a PostgreSQL URL reaches the
test server's unix socket as it is).
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import REPO, bot_command, bot_env
from tests.helpers.config import write_config

TOKEN_ENV = "WORLDBOT_LOAD_TG"


def telegram_config(folder: Path, server, database: str | None = None, sections: dict | None = None,
                    **memory) -> Path:
    """A config for a Telegram-only bot on ``server`` with its data in ``folder``/data (and its
    database there too unless ``database``, a URL, names another); ``sections``: more tables
    (table -> key -> value, such as ``[llm]`` or ``[bot] owner_ids``); ``memory``: keys of [memory]."""
    tables: dict[str, Any] = {"database": {"url": database}} if database else {}
    tables.update({"console": {"enabled": "off"},
                   "telegram": {"token_env": TOKEN_ENV, "base_url": server.base_url,
                                "base_file_url": server.base_file_url, "poll_timeout_s": 1.0,
                                "overall_max_rate": 1000.0},
                   "memory": memory})
    for name, keys in (sections or {}).items():
        tables[name] = {**tables.get(name, {}), **keys}
    return write_config(folder, tables)


def start_bot(cfg: Path, server, log: Path | None = None) -> subprocess.Popen:
    out = open(log, "ab") if log else subprocess.DEVNULL
    return subprocess.Popen(bot_command("--config", str(cfg), "run", "--no-console"), stdin=subprocess.DEVNULL,
                            stdout=out, stderr=out, cwd=REPO, env=bot_env(**{TOKEN_ENV: server.token}),
                            start_new_session=True)


def kill_9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def stop(proc: subprocess.Popen, timeout: float = 30) -> int:
    """SIGTERM, as a service manager stops it; SIGKILL when it does not end within ``timeout``."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_9(proc)
    return proc.returncode


def stored(db_path: Path, after_id: int = 0) -> list[tuple[int, str, str, str]]:
    """(row id, channel, message_id, text) of memory_messages rows after ``after_id``, in order."""
    if not db_path.exists():
        return []
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT id, channel, message_id, text FROM memory_messages WHERE id > ? ORDER BY id",
                            (after_id,)).fetchall()
    except sqlite3.OperationalError:  # not created yet (migrations still running)
        return []
    finally:
        conn.close()


def run_cli(tmp_path, *args):
    """``python -m bot --config <tmp_path>/config.toml ARGS`` from this checkout, its output captured."""
    return subprocess.run(bot_command("--config", str(tmp_path / "config.toml"), *args), cwd=REPO,
                          env=bot_env(), capture_output=True, text=True, timeout=240)
