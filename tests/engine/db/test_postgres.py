"""The PostgreSQL backend across a restart of its server: the pool and the connection that
listens for other processes' changes both come back, and nothing another process changed while
the listener was away goes unnoticed."""
from __future__ import annotations

import asyncio

import pytest

from engine.db import open_database
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(120)


async def test_change_token_and_queries_work_again_after_the_server_restarted(restartable_pg):  # noqa: F811
    url = await restartable_pg.fresh_database()
    db = await open_database(url)
    other = await open_database(url, upgrade=False)   # another bot process
    try:
        before = await db.change_token()
        await asyncio.to_thread(restartable_pg.restart, 1.0)
        assert await db.fetchval("SELECT 1") == 1
        after = await db.change_token()   # the listener was cut off: notices may have been missed
        assert after != before
        await other.execute("INSERT INTO channel_settings(scope, channel, key, value) VALUES ('s', '', 'k', 'v')")
        assert await db.change_token() != after   # the new listener hears the other process
    finally:
        await other.close()
        await db.close()
