"""Discord backfill through the real discord.py: what was said while the bot was down or
disconnected is read back from channel history, in order, for remembered channels only."""
from __future__ import annotations

import asyncio
import time

import pytest

from bot.adapters.discord_backfill import remembered_channels
from engine.memory import MemoryMessage
from tests.chat_helpers import make_app
from tests.fakes.discord_server import CHANNEL, GUILD, FakeDiscord
from tests.test_discord import start_bot, stop_bot

pytestmark = pytest.mark.timeout(120)
SCOPE = f"discord:{GUILD}"
QUIET = "3001"   # a second channel, switched off with /memory off


@pytest.fixture
async def fake():
    server = await FakeDiscord().start()
    yield server
    await server.stop()


async def texts(app, channel: str = CHANNEL) -> list[str]:
    return [r["text"] for r in await app.db.fetchall(
        "SELECT text FROM memory_messages WHERE scope=? AND channel=? ORDER BY id", (SCOPE, channel))]


async def wait_for_texts(app, n: int, channel: str = CHANNEL, timeout: float = 30) -> None:
    """Poll until memory holds ``n`` messages of ``channel``; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while len(await texts(app, channel)) < n:
        assert time.monotonic() < deadline, f"expected {n} messages in {channel}: {await texts(app, channel)}"
        await asyncio.sleep(0.05)


async def test_backfill_after_downtime_fills_the_gap_in_order(tmp_path, monkeypatch, fake, db_url):
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        for i in range(3):
            await fake.message(f"live message {i} about the river ferry timetable")
        await fake.message("a message in the quiet channel about bread", channel=QUIET)
        await wait_for_texts(app, 3)
        await wait_for_texts(app, 1, QUIET)
        await app.set_setting(SCOPE, QUIET, "memory", "off")
        last_seen = fake.history[CHANNEL][-1]["id"]
    finally:
        await stop_bot(app, stop, task)

    for i in range(5):  # said while the bot was down
        fake.missed_message(f"missed message {i} about the river ferry timetable")
    fake.missed_message("said in the quiet channel while the bot was down", channel=QUIET)
    fake.missed_message("a bot's own post is not remembered", author_id="1000")
    fake.history[CHANNEL][-1]["author"]["bot"] = True

    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        await wait_for_texts(app, 8)
        assert await texts(app) == [f"live message {i} about the river ferry timetable" for i in range(3)] + [
            f"missed message {i} about the river ferry timetable" for i in range(5)]
        reads = fake.calls_to("GET", f"/channels/{CHANNEL}/messages")
        assert reads and reads[0].query["after"] == last_seen
        assert not fake.calls_to("GET", f"/channels/{QUIET}/messages")  # memory is off there
        assert await texts(app, QUIET) == ["a message in the quiet channel about bread"]
    finally:
        await stop_bot(app, stop, task)


async def test_backfill_after_a_reconnect(tmp_path, monkeypatch, fake):
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True,
                                          backfill_max_messages=3)
    try:
        await fake.message("live message before the network hiccup about the harbour")
        await wait_for_texts(app, 1)
        for i in range(4):  # the gateway events of these were lost
            fake.missed_message(f"missed during the hiccup {i} about the harbour")
        await fake.drop_connections()
        await wait_for_texts(app, 4)
        assert fake.resumed >= 1
        # bounded: the oldest 3 of the 4 missed messages, in order
        assert await texts(app) == ["live message before the network hiccup about the harbour"] + [
            f"missed during the hiccup {i} about the harbour" for i in range(3)]
    finally:
        await stop_bot(app, stop, task)


async def test_backfill_starts_after_the_last_stored_snowflake_whatever_else_is_stored(tmp_path, db_url):
    """Real snowflakes need 64 bits, and imported history stores ids that are none (0 then)."""
    app = await make_app(tmp_path, db_url)
    try:
        await app.services["memory"].ingest_many([
            MemoryMessage(SCOPE, CHANNEL, message_id, "ann", f"message {n} about the harbour ferry")
            for n, message_id in enumerate(["10001", "1312345678901234567", "imported-7"])] + [
            MemoryMessage(SCOPE, "3002", "imported-8", "ann", "an imported message about bread"),
            MemoryMessage("telegram:5", "5", "99", "ann", "a telegram message about trams")])
        assert await remembered_channels(app) == [(SCOPE, CHANNEL, 1312345678901234567), (SCOPE, "3002", 0)]
    finally:
        await app.close()
