"""The server backend: PostgreSQL through an asyncpg pool, for several bot processes on one database.

The engine's SQL is shared with SQLite (``?`` placeholders rewritten to ``$n``). Three things
keep SQLite's meaning here:

- Writes serialise like SQLite's single writer. ``transaction()`` and ``execute()`` hold a
  transaction-scoped advisory lock, so a transaction's reads still hold when it writes, in
  every process. Reads take no lock. Job claims need no more than that; they also use
  ``FOR UPDATE SKIP LOCKED`` so a claim never waits on another process's claimed row.
- ``change_token`` follows LISTEN/NOTIFY: triggers on the tables that processes cache (memory
  stamps, channel settings) notify ``worldbot_changes`` with the writing session's pid; a
  dedicated connection listens and counts the notices of sessions not in this process's pool
  (like data_version, which moves for other connections' commits only). Before answering it makes one round trip on that connection, so every notice of a
  commit that finished before the call has been counted (the server sends pending notices before
  it reports ready), as SQLite's data_version would have moved.
- Vectors are float32 little-endian bytes in Python on both backends; in PostgreSQL they are
  pgvector ``vector`` values (a binary codec converts), so server-side queries can use them.
  ``sum`` of integers (numeric in PostgreSQL) comes back as int, fractional numerics as float.
"""
from __future__ import annotations

import asyncio
import re
import struct
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import numpy as np

from engine.db.base import Database, DatabaseUnusable
from engine.db.migrations import Migration
from engine.db.placeholders import numbered

NOTICE_CHANNEL = "worldbot_changes"
_WRITE_LOCK = 0x776F726C64   # pg_advisory_xact_lock key shared by every bot process ("world")
_RETURNS_ROWS = re.compile(r"^\s*(SELECT|WITH|VALUES|SHOW|TABLE)\b|\bRETURNING\b", re.I)
_COUNT = re.compile(r"(\d+)$")


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _vector_out(blob: bytes) -> bytes:
    values = np.frombuffer(blob, dtype="<f4")
    return struct.pack(">HH", len(values), 0) + values.astype(">f4").tobytes()


def _vector_in(data: bytes) -> bytes:
    dim, _ = struct.unpack_from(">HH", data)
    return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype("<f4").tobytes()


def _numeric_in(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eEN") else int(text)


async def _set_codecs(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("numeric", encoder=str, decoder=_numeric_in, schema="pg_catalog", format="text")
    if await conn.fetchval("SELECT to_regtype('vector') IS NOT NULL"):   # created by the first migration
        await conn.set_type_codec("vector", encoder=_vector_out, decoder=_vector_in, schema="public",
                                  format="binary")


class PgCursor:
    """What aiosqlite's cursor offers the engine: awaited, or used as ``async with``."""

    def __init__(self, conn: asyncpg.Connection, sql: str, params: Sequence[Any]):
        self._conn, self._sql, self._params = conn, sql, tuple(params)
        self.rows: list = []
        self.rowcount = -1

    async def _run(self) -> "PgCursor":
        sql = numbered(self._sql)
        if _RETURNS_ROWS.search(self._sql):
            self.rows = await self._conn.fetch(sql, *self._params)
            self.rowcount = len(self.rows)
        else:
            status = await self._conn.execute(sql, *self._params)
            found = _COUNT.search(status or "")
            self.rowcount = int(found.group(1)) if found else -1
        return self

    def __await__(self):
        return self._run().__await__()

    async def __aenter__(self) -> "PgCursor":
        return await self._run()

    async def __aexit__(self, *exc) -> None:
        return None

    async def fetchone(self):
        return self.rows[0] if self.rows else None

    async def fetchall(self) -> list:
        return list(self.rows)

    async def close(self) -> None:
        return None


class PgConnection:
    """The connection a transaction yields: the subset of aiosqlite's the engine uses."""

    def __init__(self, conn: asyncpg.Connection):
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        return PgCursor(self.raw, sql, params)

    async def executemany(self, sql: str, rows) -> None:
        rows = [tuple(r) for r in rows]
        if rows:
            await self.raw.executemany(numbered(sql), rows)

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list:
        return await self.raw.fetch(numbered(sql), *params)


class PostgresDatabase(Database):
    dialect = "postgresql"

    def __init__(self, url: str):
        self.url = url
        self.label = redacted(url)
        self.pool: asyncpg.Pool | None = None
        self._listener: asyncpg.Connection | None = None
        self._listener_lock = asyncio.Lock()
        self._lock = asyncio.Lock()   # one waiter per process on the cross-process write lock
        self._own_sessions: set[str] = set()   # server pids of this pool's connections
        self._notices = 0

    @classmethod
    async def open(cls, url: str, pool_size: int = 10) -> "PostgresDatabase":
        db = cls(url)
        db.pool = await asyncpg.create_pool(url, min_size=1, max_size=pool_size, init=db._init_connection)
        try:
            db._listener = await asyncpg.connect(url)
            await db._listener.add_listener(NOTICE_CHANNEL, db._on_notice)
        except BaseException:
            await db.close()
            raise
        return db

    async def _init_connection(self, conn: asyncpg.Connection) -> None:
        self._own_sessions.add(str(conn.get_server_pid()))
        await _set_codecs(conn)

    def _on_notice(self, _conn, _pid, _channel, payload: str) -> None:
        if payload not in self._own_sessions:
            self._notices += 1

    async def close(self) -> None:
        try:
            if self._listener is not None:
                await self._listener.close()
        finally:
            if self.pool is not None:
                await self.pool.close()

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list:
        async with self.pool.acquire() as conn:
            return await conn.fetch(numbered(sql), *params)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        async with self.transaction() as conn:
            await conn.execute(sql, params)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        async with self._lock, self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _WRITE_LOCK)
            yield PgConnection(conn)

    async def has_table(self, name: str) -> bool:
        return bool(await self.fetchval("SELECT to_regclass(?) IS NOT NULL", (name,)))

    async def change_token(self) -> int:
        async with self._listener_lock:
            await self._listener.execute("SELECT 1")
        await asyncio.sleep(0)   # asyncpg hands notices to listeners with call_soon
        return self._notices

    async def _apply(self, conn: PgConnection, migration: Migration) -> None:
        await conn.raw.execute(migration.script())

    async def upgrade(self, migrations=None, target=None) -> list[int]:
        applied = await super().upgrade(migrations, target)
        if applied:
            await self.pool.expire_connections()   # new types (vector) get their codecs on reconnect
        return applied


def _connect_error(url: str, err: BaseException) -> DatabaseUnusable:
    return DatabaseUnusable(
        f"cannot reach the database {redacted(url)}: {err}; check database.url, that PostgreSQL runs "
        "there and accepts this user (a password goes in PGPASSWORD, not in config.toml)")


async def open_postgres(url: str, upgrade: bool) -> PostgresDatabase:
    try:
        db = await PostgresDatabase.open(url)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        raise _connect_error(url, err) from None
    if upgrade:
        try:
            await db.upgrade()
        except BaseException:
            await db.close()
            raise
    return db
