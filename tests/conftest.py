"""Shared fixtures: a throwaway config and database per test, the fake OpenAI endpoint.

``db_url`` (and ``db``, and ``config_both`` built on it) runs a test once per storage backend:
SQLite in the test's folder, and a fresh database on one real PostgreSQL server per session."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from engine.config import parse_config
from engine.db import open_database

REPO = Path(__file__).resolve().parent.parent

# Files of few tests that run for a minute or more, handed to a worker before every other file.
# `--dist loadfile` (pyproject.toml) hands out the files with the most tests first, so a file of
# one long test came last and ran alone while the other worker had nothing left to do (the whole
# simulation on llama-server: 3.5 minutes). Handed out first, they run beside the rest.
LONG_FILES = ("tests/processes/test_llama_cpp_server.py", "tests/engine/sim/test_estimate.py",
              "tests/processes/test_coexist.py", "tests/engine/test_e5_encoder.py",
              "tests/engine/sim/run/test_ray_executor.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with LONG_FILES at the head of the queue."""
    if config.getoption("dist") != "loadfile":
        return None
    if missing := [name for name in LONG_FILES if not (REPO / name).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py LONG_FILES names files that are gone: {missing}")
    from xdist.scheduler import LoadFileScheduling

    class LongFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            for name in reversed(LONG_FILES):
                if name in self.workqueue:
                    self.workqueue.move_to_end(name, last=False)
            super()._assign_work_unit(node)

    return LongFilesFirst(config, log)


@pytest.fixture(autouse=True)
def root_logger_as_found():
    """Leave the root logger as the test found it. Tests that run ``bot.cli.main`` in-process get
    its logging set-up: a handler on that test's stderr, closed once the test ends. Left in place,
    a later record (a task destroyed while pending, at any garbage collection) fails to write, and
    logging's report of that formats a stack, which in CPython 3.11 parses source with ``ast``:
    inside another test's own ``ast.parse`` that raises "AST constructor recursion depth mismatch"."""
    root = logging.getLogger()
    level, before = root.level, list(root.handlers)
    yield
    for handler in root.handlers[:]:
        if handler not in before and type(handler).__module__ != "_pytest.logging":
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def config(tmp_path):
    return parse_config({"bot": {"data_dir": str(tmp_path / "data")}}, str(tmp_path / "config.toml"))


@pytest.fixture(scope="session")
def pg_server():
    from tests.helpers.pg_server import PgServer
    server = PgServer()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
async def db_url(request, tmp_path):
    """A new, empty database of each backend in turn."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'bot.sqlite3'}"
    return await request.getfixturevalue("pg_server").fresh_database()


@pytest.fixture
def config_both(db_url, tmp_path):
    """``config`` on each backend in turn."""
    return parse_config({"bot": {"data_dir": str(tmp_path / "data")}, "database": {"url": db_url}},
                        str(tmp_path / "config.toml"))


@pytest.fixture
async def db(db_url):
    database = await open_database(db_url)
    yield database
    await database.close()


@pytest.fixture
def fake_openai():
    from tests.fakes.openai_server import FakeOpenAI
    with FakeOpenAI() as server:
        yield server


def bot_command(*args: str) -> list[str]:
    """argv for running the bot from this checkout in a subprocess."""
    return [sys.executable, "-m", "bot", *args]


def bot_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    env.pop("DISCORD_TOKEN", None)
    env.pop("TELEGRAM_TOKEN", None)
    env.pop("TELEGRAM_BOT_TOKEN", None)
    return env

