"""What every storage backend offers the engine, and the migration runner they share.

Engine code sees one interface: ``fetchall / fetchone / fetchval`` for reads, ``execute`` and
``executemany`` for writes on their own, ``transaction()`` for several statements that commit
together (it yields a connection whose ``execute`` returns a cursor with ``fetchone``,
``fetchall`` and ``rowcount``, also usable as ``async with conn.execute(...) as cur``), plus
``has_table`` and ``change_token``. SQL is written once with ``?`` placeholders in the common
subset of SQLite and PostgreSQL; the few statements that cannot be (full-text search, file
pragmas) branch on ``dialect``.

A transaction has SQLite's meaning on every backend: transactions never interleave, in this
process or any other, so a read inside one sees what the write after it will change. Rows come
back with both ``row[0]`` and ``row["name"]``.
"""
from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from engine.db.migrations import Migration, discover_migrations

log = logging.getLogger(__name__)
T = TypeVar("T")
OUTAGE_FIRST_WAIT_S, OUTAGE_MAX_WAIT_S = 0.5, 10.0


class SchemaTooNew(Exception):
    """The database was written by a newer version of the bot."""


class DatabaseUnusable(Exception):
    """The database cannot be opened, or (when the bot will write) cannot be written."""


class Database(ABC):
    dialect: str
    label: str   # names the database in messages (a file path, or a URL without password)

    @abstractmethod
    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list: ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()):
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, params: Sequence[Any] = (), default: Any = None) -> Any:
        row = await self.fetchone(sql, params)
        return default if row is None else row[0]

    @abstractmethod
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one write statement on its own (where a new key is needed, write ``RETURNING id``
        inside a transaction and read it from the cursor)."""

    async def executemany(self, sql: str, rows) -> None:
        async with self.transaction() as conn:
            await conn.executemany(sql, rows)

    @abstractmethod
    def transaction(self) -> AbstractAsyncContextManager: ...

    def unreachable(self, err: BaseException) -> bool:
        """Whether ``err`` says the database cannot be reached right now (a server restarting, a
        connection cut off) rather than that a statement failed: work that hit it is worth doing
        again, unchanged, once the database is back. A file (SQLite) has no such state: one it
        cannot use is refused at start."""
        return False

    async def outlasting(self, call: Callable[[], Awaitable[T]], what: str, within: float | None = None) -> T:
        """``call()``, called again while it fails because the database cannot be reached (with a
        growing pause, at most ``OUTAGE_MAX_WAIT_S``): what must not be lost waits for the
        database instead. Any other failure raises at once; so does the last unreachable one once
        the wait has lasted ``within`` seconds (None: no bound). One warning per wait (the tries
        after it at DEBUG), one line when the database is back."""
        wait, waited = OUTAGE_FIRST_WAIT_S, False
        deadline = None if within is None else asyncio.get_running_loop().time() + within
        while True:
            try:
                result = await call()
                if waited:
                    log.info("the database is back; %s went on", what)
                return result
            except Exception as err:
                if not self.unreachable(err):
                    raise
                left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                if left is not None and left <= 0:
                    log.warning("the database could not be reached for %.0f s; %s gave up waiting", within, what)
                    raise
                log.log(logging.DEBUG if waited else logging.WARNING,
                        "the database cannot be reached (%s); %s wait%s for it, again in %.1f s",
                        type(err).__name__, what, "" if what.endswith("s") else "s", wait)
                waited = True
            await asyncio.sleep(wait if left is None else min(wait, left))
            wait = min(wait * 2, OUTAGE_MAX_WAIT_S)

    @abstractmethod
    async def has_table(self, name: str) -> bool: ...

    @abstractmethod
    async def change_token(self) -> int:
        """A number that moves when another process may have committed since it was last read
        (SQLite: PRAGMA data_version; PostgreSQL: notices received by LISTEN)."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def _apply(self, conn, migration: Migration) -> None:
        """Run one migration's SQL inside the open transaction ``conn``."""

    # -- migrations -------------------------------------------------------------------

    def migrations(self) -> list[Migration]:
        return discover_migrations(dialect=self.dialect)

    async def current_version(self) -> int:
        if not await self.has_table("schema_version"):
            return 0
        return await self.fetchval("SELECT coalesce(max(version), 0) FROM schema_version", default=0)

    async def upgrade(self, migrations: list[Migration] | None = None, target: int | None = None) -> list[int]:
        """Apply every pending migration in order, each in its own transaction."""
        migrations = self.migrations() if migrations is None else migrations
        latest = migrations[-1].version if migrations else 0
        current = await self.current_version()
        if current > latest:
            raise SchemaTooNew(
                f"database {self.label} has schema version {current}, newer than this bot "
                f"knows ({latest}); upgrade the bot or use another database"
            )
        applied = []
        for mig in migrations:
            if mig.version <= current or (target is not None and mig.version > target):
                continue
            async with self.transaction() as conn:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version ("
                    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
                )
                async with conn.execute("SELECT 1 FROM schema_version WHERE version=?", (mig.version,)) as cur:
                    done_elsewhere = await cur.fetchone() is not None
                if done_elsewhere:   # another process applied it while this one waited for the lock
                    continue
                await self._apply(conn, mig)
                await conn.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                    (mig.version, mig.name, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")),
                )
            applied.append(mig.version)
        return applied
