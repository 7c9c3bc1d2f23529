"""The bot on the fake Discord (tests/fakes/discord_server.py), through the real discord.py: the
``fake`` fixture, ``start_bot``/``stop_bot`` and ``wait_for_texts`` (memory holds a channel's messages)."""
from __future__ import annotations

import asyncio
import time

import pytest

from bot.adapters import discord_adapter
from bot.adapters.base import serve
from tests.fakes.discord_server import CHANNEL, GUILD, FakeDiscord
from tests.helpers.chat import add_test_simulation, make_app


@pytest.fixture
async def fake():
    server = await FakeDiscord().start()
    yield server
    await server.stop()


async def start_bot(tmp_path, monkeypatch, server, extra=None, before_start=None, db_url=None, **discord_cfg):
    """The bot on the fake; the tests whose point is storage pass conftest's ``db_url`` (both backends),
    the presentational ones stay on SQLite (suite time)."""
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    app = await make_app(tmp_path, db_url, discord={"token_env": "DISCORD_TEST_TOKEN", "api_base": server.api_base,
                                                    "gateway_url": server.gateway_url, **discord_cfg})
    gate = asyncio.Event()
    runs = add_test_simulation(app, gate)
    if extra:
        extra(app)
    if before_start:
        await before_start(app)
    await app.start()
    stop = asyncio.Event()
    adapter = app.adapters.add(discord_adapter.DiscordAdapter(app))
    task = asyncio.create_task(serve(adapter, stop))
    await asyncio.wait_for(server.identified.wait(), 10)
    for _ in range(100):  # the adapter posts into channels once the guild arrived
        if app.reply_to(f"discord:{GUILD}", CHANNEL) is not None:
            break
        await asyncio.sleep(0.05)
    return app, stop, task, gate, runs


async def stop_bot(app, stop, task):
    await app.jobs.shutdown()
    stop.set()
    await asyncio.wait_for(task, 15)
    await app.close()


async def texts(app, channel: str = CHANNEL) -> list[str]:
    return [r["text"] for r in await app.db.fetchall(
        "SELECT text FROM memory_messages WHERE scope=? AND channel=? ORDER BY id", (f"discord:{GUILD}", channel))]


async def wait_for_texts(app, n: int, channel: str = CHANNEL, timeout: float = 30) -> None:
    """Poll until memory holds ``n`` messages of ``channel``; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while len(await texts(app, channel)) < n:
        assert time.monotonic() < deadline, f"expected {n} messages in {channel}: {await texts(app, channel)}"
        await asyncio.sleep(0.05)
