"""Two bot processes on one database with the same Telegram bot: the Bot API serves one
getUpdates consumer, so one polls, the other stands by (and says so), then takes over when the
first ends. Real python-telegram-bot against the fake Bot API."""
from __future__ import annotations

import asyncio
import logging

import pytest

from bot.adapters import telegram_adapter
from bot.adapters.base import serve
from tests.fakes.telegram_server import FakeTelegram
from tests.helpers.chat import make_app
from tests.helpers.wait import until

TOKEN = "123:TEST"
pytestmark = pytest.mark.timeout(60)


async def start(tmp_path, db_url, server, name: str, heard: list, arrived: asyncio.Event):
    app = await make_app(tmp_path, db_url, jobs={"progress_interval_s": 0, "lease_s": 1.5}, telegram={
        "token_env": "TG_TEST_TOKEN", "base_url": server.base_url, "base_file_url": server.base_file_url,
        "poll_timeout_s": 1})

    async def listener(msg):
        heard.append((name, msg.text))
        arrived.set()
    app.listeners.insert(0, listener)
    await app.start()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app.adapters.add(telegram_adapter.TelegramAdapter(app)), stop))
    return app, stop, task


async def shut(app, stop, task) -> None:
    await app.jobs.shutdown()
    stop.set()
    await asyncio.wait_for(task, 20)
    await app.close()


async def test_one_process_polls_the_other_stands_by_and_takes_over(tmp_path, db_url, monkeypatch, caplog):
    monkeypatch.setenv("TG_TEST_TOKEN", TOKEN)
    caplog.set_level(logging.WARNING, logger="bot.adapters.telegram_adapter")
    server = await FakeTelegram(TOKEN).start()
    heard: list[tuple[str, str]] = []
    arrived = asyncio.Event()
    first = await start(tmp_path, db_url, server, "first", heard, arrived)
    app = first[0]

    async def first_polls() -> bool:
        return await app.db.fetchval("SELECT owner FROM claims") == app.owner.id
    await until(first_polls, 15)
    second = await start(tmp_path, db_url, server, "second", heard, arrived)  # the same database
    try:
        async def second_stands_by() -> bool:
            return any("already polled by another bot process" in r.getMessage() for r in caplog.records)
        await until(second_stands_by, 15)

        server.push_message(70, "the ferry leaves at nine")
        await asyncio.wait_for(arrived.wait(), 10)
        assert heard == [("first", "the ferry leaves at nine")]

        await shut(*first)
        first = None

        async def second_polls() -> bool:
            return any("this one polls it now" in r.getMessage() for r in caplog.records)
        await until(second_polls, 15)
        arrived.clear()
        server.push_message(70, "the ferry is late")
        await asyncio.wait_for(arrived.wait(), 10)
        assert heard == [("first", "the ferry leaves at nine"), ("second", "the ferry is late")]
        assert await second[0].db.fetchval("SELECT owner FROM claims") == second[0].owner.id
    finally:
        for running in (first, second):
            if running is not None:
                await shut(*running)
        await server.stop()
