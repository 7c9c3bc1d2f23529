"""Discord shards split the servers between bot processes: two processes on one database, each
running one of two shards through discord.py's AutoShardedClient, against the fake gateway."""
from __future__ import annotations

import asyncio

import pytest

from bot.adapters import discord_adapter
from bot.adapters.base import serve
from engine.config import ConfigError, parse_config
from tests.fakes.discord_server import CHANNEL, GUILD, FakeDiscord
from tests.helpers.chat import make_app

pytestmark = pytest.mark.timeout(60)
OTHER_GUILD = str(1 << 22)  # (id >> 22) % 2 == 1: Discord routes it to the second of two shards


@pytest.fixture
async def fake():
    server = await FakeDiscord().start()
    yield server
    await server.stop()


async def start_shard(tmp_path, server, shard: int, heard: list, arrived: asyncio.Event):
    # SQLite only: the point is how the gateway splits the servers, not storage (suite time).
    app = await make_app(tmp_path, discord={
        "token_env": "DISCORD_TEST_TOKEN", "api_base": server.api_base, "gateway_url": server.gateway_url,
        "message_content": True, "shard_count": 2, "shard_ids": [shard]})

    async def listener(msg):
        heard.append((shard, msg.scope, msg.channel, msg.text))
        arrived.set()
    app.listeners.insert(0, listener)
    await app.start()
    stop = asyncio.Event()
    adapter = app.adapters.add(discord_adapter.DiscordAdapter(app))
    ready = asyncio.Event()
    app.on_ready.append(lambda platform: _set(ready))
    task = asyncio.create_task(serve(adapter, stop))
    await asyncio.wait_for(ready.wait(), 20)
    return app, adapter, stop, task


async def _set(event: asyncio.Event) -> None:
    event.set()


async def test_two_processes_each_serve_the_servers_of_their_shard(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    other_channel = fake.add_guild(OTHER_GUILD)
    heard: list[tuple] = []
    arrived = asyncio.Event()
    first = await start_shard(tmp_path, fake, 0, heard, arrived)
    second = await start_shard(tmp_path, fake, 1, heard, arrived)  # same database: tmp_path/data
    try:
        assert sorted(fake.identified_shards) == [(0, 2), (1, 2)]  # each process identified its own shard
        assert [g.id for g in first[1].client.guilds] == [int(GUILD)]
        assert [g.id for g in second[1].client.guilds] == [int(OTHER_GUILD)]
        for channel, text in ((CHANNEL, "the bridge reopens"), (other_channel, "the ferry is late")):
            arrived.clear()
            await fake.message(text, channel=channel)
            await asyncio.wait_for(arrived.wait(), 10)
        assert heard == [(0, f"discord:{GUILD}", CHANNEL, "the bridge reopens"),
                         (1, f"discord:{OTHER_GUILD}", other_channel, "the ferry is late")]
        # each process answers in the channels of its own servers
        assert first[0].reply_to(f"discord:{GUILD}", CHANNEL) is not None
    finally:
        for app, _, stop, task in (first, second):
            await app.jobs.shutdown()
            stop.set()
            await asyncio.wait_for(task, 15)
            await app.close()


@pytest.mark.parametrize("discord, message", [
    ({"shard_ids": [0]}, "set shard_count"),
    ({"shard_count": 2, "shard_ids": [2]}, "shard 2 does not exist; shards are numbered 0 to 1"),
    ({"shard_count": 2, "shard_ids": [1, 1]}, "listed twice"),
])
def test_shard_settings_that_cannot_work_are_refused_at_start(discord, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"discord": discord})
