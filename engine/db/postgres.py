"""The server backend: PostgreSQL through an asyncpg pool, for several bot processes on one database.

The engine's SQL is shared with SQLite (``?`` placeholders rewritten to ``$n``). Three things
keep SQLite's meaning here:

- Writes serialise like SQLite's single writer. ``transaction()`` and ``execute()`` hold a
  transaction-scoped advisory lock, so a transaction's reads still hold when it writes, in
  every process. Reads take no lock. Job claims need no more than that; they also use
  ``FOR UPDATE SKIP LOCKED`` so a claim never waits on another process's claimed row.
- ``change_token`` follows LISTEN/NOTIFY: triggers on the tables that processes cache (memory
  stamps, channel settings) notify ``worldbot_changes`` with the writing session's pid; a dedicated
  connection listens and counts the notices of sessions not in this process's pool (like
  data_version, which moves for other connections' commits only). Before answering it makes one
  round trip on that connection, so every notice of a commit that finished before the call has been
  counted (the server sends pending notices before it reports ready), as SQLite's data_version would
  have moved. A listener cut off (the server restarted) is connected again at the next call, and
  the token moves then: what changed while nobody listened counts as changed.
- Every connection carries ``[database] statement_timeout_s`` (a runaway query is cancelled
  instead of holding a connection and the write lock); migrations lift it for their own
  transaction, since they are bounded by the data's size. TLS follows ``[database] sslmode``
  (``ssl_mode``): by default none to a loopback host or a Unix socket, verify-full to any other.
- Vectors are float32 little-endian bytes in Python on both backends; in PostgreSQL they are
  pgvector ``vector`` values (a binary codec converts), so server-side queries can use them.
  ``sum`` of integers (numeric in PostgreSQL) comes back as int, fractional numerics as float.
"""
from __future__ import annotations

import asyncio
import os
import re
import struct
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Sequence
from urllib.parse import parse_qs, urlsplit

import asyncpg
import numpy as np

from engine.db.base import Database, DatabaseUnusable
from engine.db.migrations import Migration
from engine.db.placeholders import numbered
from engine.redact import mask_url_passwords

if TYPE_CHECKING:
    from engine.config import DatabaseSection

NOTICE_CHANNEL = "worldbot_changes"
_WRITE_LOCK = 0x776F726C64   # pg_advisory_xact_lock key shared by every bot process ("world")
_RETURNS_ROWS = re.compile(r"^\s*(SELECT|WITH|VALUES|SHOW|TABLE)\b|\bRETURNING\b", re.I)
_COUNT = re.compile(r"(\d+)$")
LOOPBACK = {"localhost", "127.0.0.1", "::1"}


def redacted(url: str) -> str:
    """The URL without its password (in the netloc or a ``password`` parameter), for messages and logs."""
    return mask_url_passwords(url)


def _hosts(url: str) -> list[str]:
    """The hosts a URL names (netloc, ``?host=``, else PGHOST); '' stands for libpq's default, local."""
    parts = urlsplit(url)
    named = [item[1:item.find("]")] if item.startswith("[") else item.split(":", 1)[0]
             for item in parts.netloc.rpartition("@")[2].split(",")]
    named += [h for value in parse_qs(parts.query).get("host", []) for h in value.split(",")]
    return [h for h in named if h] or (os.environ.get("PGHOST", "").split(",") or [""])


def ssl_mode(url: str, configured: str) -> str | None:
    """The sslmode for asyncpg: ``configured`` unless it is "auto". "auto" leaves the URL's own
    ``sslmode`` (or PGSSLMODE) to asyncpg (None), and otherwise asks for none when every host is
    local (a Unix socket, a loopback address: the traffic never leaves the machine) and for
    verify-full (encrypted, and the server's certificate checked against the CA in
    ``~/.postgresql/root.crt`` or the URL's ``sslrootcert``) when one is not."""
    if configured != "auto":
        return configured
    if "sslmode" in parse_qs(urlsplit(url).query) or os.environ.get("PGSSLMODE"):
        return None
    local = all(not h or h.startswith("/") or h in LOOPBACK for h in _hosts(url))
    return "disable" if local else "verify-full"


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

    def __init__(self, conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, sql: str, params: Sequence[Any]):
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

    def __init__(self, conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy):
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
        self._options: dict[str, Any] = {}

    @classmethod
    async def open(cls, url: str, pool_size: int = 10, sslmode: str = "auto",
                   statement_timeout_s: float = 0.0) -> "PostgresDatabase":
        db = cls(url)
        # Plans are made for each statement's values, never the generic plan asyncpg's prepared
        # statements switch to after five runs: servers and chats differ in size by orders of
        # magnitude, and a plan priced for the average scope is wrong for each. (The vector index's
        # catch-up, "scope = $1 AND id > $2", walked the primary key through every other server's
        # newer rows under the generic plan: 68 ms for no row beside 30k of them, 0.1 ms planned
        # for its values.) Planning costs about a millisecond.
        settings = {"plan_cache_mode": "force_custom_plan"}
        if statement_timeout_s > 0:
            settings["statement_timeout"] = str(max(1, round(statement_timeout_s * 1000)))
        options: dict[str, Any] = {"ssl": ssl_mode(url, sslmode), "server_settings": settings}
        db._options = options
        db.pool = await asyncpg.create_pool(url, min_size=1, max_size=pool_size, init=db._init_connection, **options)
        try:
            await db._listen()
        except BaseException:
            await db.close()
            raise
        return db

    async def _listen(self) -> None:
        self._listener = await asyncpg.connect(self.url, **self._options)
        await self._listener.add_listener(NOTICE_CHANNEL, self._on_notice)

    async def _init_connection(self, conn: asyncpg.Connection) -> None:
        self._own_sessions.add(str(conn.get_server_pid()))
        await _set_codecs(conn)

    def _on_notice(self, _conn, _pid, _channel, payload: object) -> None:
        if payload not in self._own_sessions:
            self._notices += 1

    async def close(self) -> None:
        try:
            if self._listener is not None:
                await self._listener.close()
        finally:
            if self.pool is not None:
                await self.pool.close()

    def _open_pool(self) -> asyncpg.Pool:
        assert self.pool is not None, "the database is not open"
        return self.pool

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list:
        async with self._open_pool().acquire() as conn:
            return await conn.fetch(numbered(sql), *params)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        async with self.transaction() as conn:
            await conn.execute(sql, params)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgConnection]:
        async with self._lock, self._open_pool().acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _WRITE_LOCK)
            yield PgConnection(conn)

    async def has_table(self, name: str) -> bool:
        return bool(await self.fetchval("SELECT to_regclass(?) IS NOT NULL", (name,)))

    def unreachable(self, err: BaseException) -> bool:
        # OSError: the pool's connect to a server that is down (refused, or its socket file gone).
        # InternalClientError: a pooled connection still reading the server's notice that it shuts
        # down ("another operation (2) is in progress") when the next statement is sent on it.
        return isinstance(err, (OSError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError,
                                asyncpg.AdminShutdownError, asyncpg.CrashShutdownError,
                                asyncpg.exceptions.InternalClientError)) or (
            isinstance(err, asyncpg.InterfaceError) and "closed" in str(err))

    async def change_token(self) -> int:
        assert self._listener is not None, "the database is not open"
        async with self._listener_lock:
            try:
                await self._listener.execute("SELECT 1")
            except (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError,
                    asyncpg.exceptions.OperatorInterventionError):
                # cut off (a server restart): listen again; notices sent meanwhile are lost
                self._listener.terminate()
                await self._listen()
                self._notices += 1
        await asyncio.sleep(0)   # asyncpg hands notices to listeners with call_soon
        return self._notices

    async def _apply(self, conn: PgConnection, migration: Migration) -> None:
        await conn.raw.execute("SET LOCAL statement_timeout = 0")   # bounded by the data's size, not a runaway
        await conn.raw.execute(migration.script())

    async def upgrade(self, migrations=None, target=None) -> list[int]:
        applied = await super().upgrade(migrations, target)
        if applied:
            await self._open_pool().expire_connections()   # new types (vector) get their codecs on reconnect
        return applied


def _connect_error(url: str, err: BaseException) -> DatabaseUnusable:
    return DatabaseUnusable(
        f"cannot reach the database {redacted(url)}: {mask_url_passwords(' '.join(str(err).split()))}; "
        "check database.url, "
        "database.sslmode (a server elsewhere is reached with verify-full unless set otherwise: its CA "
        "certificate in ~/.postgresql/root.crt or ?sslrootcert=), that PostgreSQL runs there and accepts this "
        "user (a password goes in PGPASSWORD, not in config.toml)")


async def open_postgres(url: str, upgrade: bool, settings: "DatabaseSection") -> PostgresDatabase:
    try:
        db = await PostgresDatabase.open(url, sslmode=settings.sslmode,
                                         statement_timeout_s=settings.statement_timeout_s)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
        raise _connect_error(url, err) from None
    if upgrade:
        try:
            await db.upgrade()
        except BaseException:
            await db.close()
            raise
    return db
