"""The bot on the fake Telegram Bot API (tests/fakes/telegram_server.py), polling through the real
python-telegram-bot: the ``tg`` fixture (app, server, the test simulation's runs and its gate),
``fake_telegram`` (the fake alone, for a test that builds its own bot) and ``text_of`` (the text of
a Bot API call)."""
from __future__ import annotations

import asyncio

import pytest

from bot.adapters import telegram_adapter
from bot.adapters.base import serve
from tests.fakes.telegram_server import USER_ID, FakeTelegram
from tests.helpers.chat import add_test_simulation, make_app
from tests.helpers.wait import until

TOKEN = "123:TEST"


@pytest.fixture
async def fake_telegram(monkeypatch):
    """The fake Bot API alone, its token in TG_TEST_TOKEN (a bot's ``token_env``), stopped after the
    test; the bot on it is the test's own."""
    monkeypatch.setenv("TG_TEST_TOKEN", TOKEN)
    server = await FakeTelegram(TOKEN).start()
    yield server
    await server.stop()


# On both backends (db_url); tests of presentation, of refusals that store nothing, or of what
# test_permissions covers on both (the memory setting) are sqlite_only (suite time).
@pytest.fixture
async def tg(tmp_path, monkeypatch, db_url):
    monkeypatch.setenv("TG_TEST_TOKEN", TOKEN)
    server = await FakeTelegram(TOKEN).start()
    app = await make_app(tmp_path, db_url, telegram={
        "token_env": "TG_TEST_TOKEN", "base_url": server.base_url, "base_file_url": server.base_file_url,
        "poll_timeout_s": 1}, bot={"owner_ids": [f"telegram:{USER_ID}"]})  # private chats are the owner's
    gate = asyncio.Event()
    runs = add_test_simulation(app, gate)
    await app.start()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app.adapters.add(telegram_adapter.TelegramAdapter(app)), stop))
    # connected once its command menu is set in every language (the last step of connecting)
    await until(lambda: app.reply_to("telegram:1", "1") is not None, 20, "the Telegram adapter to connect")
    yield app, server, runs, gate
    await app.jobs.shutdown()
    stop.set()
    await asyncio.wait_for(task, 20)
    await app.close()
    await server.stop()


def text_of(call) -> str:
    return call.params.get("text") or call.params.get("caption") or ""
