"""Channel settings are cached per process, yet a change made by another process on the same
database (/memory off there) is seen here too: on SQLite through data_version, on PostgreSQL
through the change notices (LISTEN/NOTIFY) that channel_settings' trigger sends."""
from __future__ import annotations

import bot.app
from bot.app import MEMORY_SETTING
from tests.helpers.chat import make_app


async def test_a_setting_changed_by_another_process_is_seen(tmp_path, db_url, monkeypatch):
    monkeypatch.setattr(bot.app, "SETTINGS_RECHECK_S", 0.0)  # check the database on every read
    here = await make_app(tmp_path, db_url)
    there = await make_app(tmp_path, db_url)  # its own connections, as a second process has
    try:
        assert await here.get_setting("console:t", "c", MEMORY_SETTING, "on") == "on"  # now cached here
        await there.set_setting("console:t", "c", MEMORY_SETTING, "off")
        assert await here.get_setting("console:t", "c", MEMORY_SETTING, "on") == "off"
        await here.set_setting("console:t", "c", MEMORY_SETTING, "on")  # its own write is seen at once
        assert await here.get_setting("console:t", "c", MEMORY_SETTING, "on") == "on"
    finally:
        await here.close()
        await there.close()
