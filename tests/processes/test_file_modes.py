"""The bot's files are its user's only: the real bot process on the Telegram fake takes a
document with /simulate, and every folder and file it wrote under its data folder (database,
downloads, the simulation's folder) is 0700 or 0600; a data folder an earlier version left open
to others is closed at start."""
from __future__ import annotations

import stat

import pytest

from tests.fakes.openai_server import FakeOpenAI, Raw, completion
from tests.fakes.telegram_server import USER_ID, FakeTelegram
from tests.helpers.bot_process import start_bot, stop, telegram_config
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(180)


def open_to_others(root) -> list[str]:
    return [f"{p.relative_to(root)} {stat.filemode(p.stat().st_mode)}"
            for p in [root, *root.rglob("*")] if p.stat().st_mode & 0o077]


async def test_everything_the_bot_writes_is_its_users_only(tmp_path):
    server = await FakeTelegram("123:TEST").start()
    llm = FakeOpenAI(lambda body: Raw(body=completion("later"), delay=200)).start()   # the pipeline waits
    cfg = telegram_config(tmp_path, server, sections={
        "bot": {"owner_ids": [f"telegram:{USER_ID}"]},   # in their private chat, the owner may /simulate
        "llm": {"base_url": llm.base_url, "model": "m"},
        "simulation": {"confirm_above_usd": 0, "confirm_above_tokens": 0}})
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)   # as an earlier version left it
    server.add_file("doc1", "news.txt", b"The harbour workers strike on Monday; the ferries stop.")
    bot = start_bot(cfg, server, tmp_path / "bot.log")
    try:
        await server.wait_for("setMyCommands", timeout=60)
        server.push_message(USER_ID, "the ferries stop on Monday, the harbour strike goes on")
        server.push_message(USER_ID, "/simulate what happens to the ferries?",
                            document={"file_id": "doc1", "file_name": "news.txt", "file_size": 56})
        await server.wait_for("sendMessage", lambda c: "started (job" in c.params["text"], timeout=90)
        await until(lambda: any((data / "sims").rglob("*news.txt")), 30, "the simulation's copy", bot)
    finally:
        assert stop(bot) == 0, (tmp_path / "bot.log").read_text()[-3000:]
        llm.stop()
        await server.stop()
    written = {p.relative_to(data).parts[0] for p in data.iterdir()}
    assert {"bot.sqlite3", "downloads", "sims"} <= written
    assert open_to_others(data) == []
    assert "data was readable by other users" in (tmp_path / "bot.log").read_text()
