"""The real bot in a subprocess (`python -m bot run`), polling a FakeTelegram of the caller.

Shared by the crash tests and bench/load.py: write a config that points the Telegram adapter
at the fake, start and kill the process, and read what memory stored straight from SQLite
(WAL: reading while the bot writes is safe). ``write_config(database=url)`` puts the bot on
another database (a PostgreSQL URL reaches the test server's unix socket as it is).
"""
from __future__ import annotations

import asyncio
import inspect
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.conftest import REPO, bot_command, bot_env

TOKEN_ENV = "WORLDBOT_LOAD_TG"


def write_config(folder: Path, server, database: str | None = None, **memory) -> Path:
    """A config for a Telegram-only bot on ``server`` with its data in ``folder``/data (and its
    database there too unless ``database``, a URL, names another)."""
    extra = "".join(f"{key} = {value!r}\n" for key, value in memory.items())
    cfg = folder / "config.toml"
    url = f'[database]\nurl = "{database}"\n' if database else ""
    cfg.write_text(f'[bot]\ndata_dir = "data"\n{url}[console]\nenabled = "off"\n'
                   f'[telegram]\ntoken_env = "{TOKEN_ENV}"\nbase_url = "{server.base_url}"\n'
                   f'base_file_url = "{server.base_file_url}"\npoll_timeout_s = 1.0\n'
                   f'overall_max_rate = 1000.0\n[memory]\n{extra}')
    return cfg


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


async def wait_until(condition, timeout: float, what: str, proc: subprocess.Popen | None = None,
                     every: float = 0.05) -> None:
    """Poll ``condition()`` (a function, or a coroutine function) until it is true; AssertionError
    after ``timeout`` s or if ``proc`` died."""
    deadline = time.monotonic() + timeout
    while not ((await result) if inspect.isawaitable(result := condition()) else result):
        assert proc is None or proc.poll() is None, f"the bot exited ({proc.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(every)
