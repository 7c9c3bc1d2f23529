"""The embedded backend: one aiosqlite connection to a file in WAL mode.

Writes are serialised with a lock so this process's transactions never interleave; BEGIN
IMMEDIATE does the same across processes sharing the file.
"""
from __future__ import annotations

import asyncio
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import aiosqlite

from engine.db.base import Database, DatabaseUnusable
from engine.db.migrations import Migration


class SqliteDatabase(Database):
    dialect = "sqlite"

    def __init__(self, conn: aiosqlite.Connection, path: Path):
        self.conn = conn
        self.path = path
        self.label = str(path)
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: str | Path) -> "SqliteDatabase":
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        pending = aiosqlite.connect(str(path), isolation_level=None)
        # aiosqlite's worker thread is not a daemon: one connection left open (a crashed
        # command, a failed test) would keep the interpreter from ever exiting.
        pending._thread.daemon = True
        conn = await pending
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        await conn.execute("PRAGMA synchronous=NORMAL")
        return cls(conn, path)

    async def close(self) -> None:
        await self.conn.close()

    # Reads run and finish in one call on the connection's thread. A cursor handed back to
    # this loop would stay open if the awaiting task were cancelled before closing it, and an
    # open read statement pins the connection to an old snapshot: its next write then fails at
    # once with "database is locked" as soon as another process has committed.

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        return list(await self.conn.execute_fetchall(sql, params))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        async with self._lock:
            await (await self.conn.execute(sql, params)).close()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE .. COMMIT, rolled back on any exception.

        A task cancelled while its BEGIN waits on the connection's thread does not stop the BEGIN:
        it is rolled back there before the lock is given up, or the connection would stay inside
        that transaction and every later BEGIN would fail."""
        async with self._lock:
            try:
                await self.conn.execute("BEGIN IMMEDIATE")
            except asyncio.CancelledError:
                try:
                    await self.conn.execute("ROLLBACK")   # runs after the BEGIN: the thread keeps order
                except sqlite3.Error:
                    pass   # the BEGIN itself failed: nothing to roll back
                raise
            try:
                yield self.conn
            except BaseException:
                await self.conn.execute("ROLLBACK")
                raise
            else:
                await self.conn.execute("COMMIT")

    async def has_table(self, name: str) -> bool:
        return bool(await self.fetchval(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", (name,)))

    async def change_token(self) -> int:
        return await self.fetchval("PRAGMA data_version")

    async def _apply(self, conn, migration: Migration) -> None:
        for stmt in migration.statements():
            await conn.execute(stmt)

    async def prove_writable(self) -> None:
        """A write that is rolled back: a read-only file (or file system) fails here, at start,
        rather than on the first message stored."""
        async with self._lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                await self.conn.execute("CREATE TABLE _write_probe(x)")
            finally:
                await self.conn.execute("ROLLBACK")


# SQLite errors that say the file itself cannot be used (rather than a bug in a statement).
_UNUSABLE = ("readonly", "unable to open", "disk i/o", "file is not a database", "disk is full")


def _unusable(err: Exception) -> bool:
    return isinstance(err, OSError) or any(m in str(err).lower() for m in _UNUSABLE)


def _fix(err: Exception) -> str:
    if "not a database" in str(err):
        return "database.path must name an SQLite database of the bot, or a file that does not exist yet"
    return "make the file and its folder writable for the bot's user, or set database.path to another file"


async def open_sqlite(path: str | Path, upgrade: bool) -> SqliteDatabase:
    try:
        db = await SqliteDatabase.open(path)
    except (sqlite3.DatabaseError, OSError) as err:
        if not _unusable(err):
            raise
        raise DatabaseUnusable(f"cannot open the database {path}: {err}; {_fix(err)}") from None
    if upgrade:
        try:
            if not await db.upgrade():  # nothing applied, so nothing written yet: prove it can be
                await db.prove_writable()
        except BaseException as err:
            await db.close()
            if isinstance(err, (sqlite3.DatabaseError, OSError)) and _unusable(err):
                raise DatabaseUnusable(f"cannot write the database {path}: {err}; {_fix(err)}") from None
            raise
    return db
