"""Shared fixtures: a throwaway config and database per test, the fake OpenAI endpoint."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engine.config import parse_config
from engine.db import open_database

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def config(tmp_path):
    return parse_config({"bot": {"data_dir": str(tmp_path / "data")}}, str(tmp_path / "config.toml"))


@pytest.fixture
async def db(config):
    database = await open_database(config.db_path)
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

