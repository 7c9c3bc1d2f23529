"""Channel settings: small named values per (scope, channel), such as whether memory listens there.

This module owns the ``channel_settings`` table: every statement on it is here
(tests/test_sql_owners.py). The chat app caches what it reads (bot/app.py ``get_setting``); another
owner's query may read the table in a sub-select where a setting decides which of its rows count
(the Discord backfill leaves out channels whose memory is off).
"""
from __future__ import annotations

from engine.db import Database


async def read(db: Database, scope: str, channel: str, key: str) -> str | None:
    """The stored value of setting ``key`` in a channel, None where it was never set."""
    return await db.fetchval(
        "SELECT value FROM channel_settings WHERE scope=? AND channel=? AND key=?", (scope, channel, key))


async def write(db: Database, scope: str, channel: str, key: str, value: str) -> None:
    """Set ``key`` to ``value`` in a channel, replacing what it held."""
    await db.execute(
        "INSERT INTO channel_settings(scope, channel, key, value) VALUES (?,?,?,?)"
        " ON CONFLICT(scope, channel, key) DO UPDATE SET value=excluded.value",
        (scope, channel, key, value))
