"""SQLite storage (aiosqlite, WAL) and the numbered-SQL-file migration runner."""
from __future__ import annotations

import asyncio
import re
import sqlite3
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Sequence

import aiosqlite

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


class SchemaTooNew(Exception):
    """The database was written by a newer version of the bot."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def statements(self) -> list[str]:
        """Split the file into complete statements (triggers with BEGIN..END stay whole)."""
        out, buf = [], ""
        for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True):
            buf += line
            if sqlite3.complete_statement(buf):
                if buf.strip():
                    out.append(buf.strip())
                buf = ""
        if buf.strip() and not buf.strip().startswith("--"):
            raise ValueError(f"{self.path.name}: incomplete statement at end of file")
        return out


def discover_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise ValueError(f"migration file name must look like 0001_name.sql: {path.name}")
        found.append(Migration(int(m.group(1)), path.stem, path))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return found


class Database:
    """One aiosqlite connection. Writes are serialised with a lock so transactions never interleave."""

    dialect = "sqlite"   # the SQL this database speaks (engine.memory.keyword_sql chooses by it)

    def __init__(self, conn: aiosqlite.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: str | Path) -> "Database":
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

    async def fetchall(self, sql: str, params: Sequence[Any] | dict = ()) -> list[aiosqlite.Row]:
        return list(await self.conn.execute_fetchall(sql, params))

    async def fetchone(self, sql: str, params: Sequence[Any] | dict = ()) -> aiosqlite.Row | None:
        rows = await self.conn.execute_fetchall(sql, params)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, params: Sequence[Any] | dict = (), default: Any = None) -> Any:
        row = await self.fetchone(sql, params)
        return default if row is None else row[0]

    async def execute(self, sql: str, params: Sequence[Any] | dict = ()) -> int:
        """Run one write statement on its own; returns lastrowid."""
        async with self._lock:
            cur = await self.conn.execute(sql, params)
            rowid = cur.lastrowid
            await cur.close()
            return rowid

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        async with self.transaction() as conn:
            await conn.executemany(sql, rows)

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

    # -- migrations -------------------------------------------------------------------

    async def current_version(self) -> int:
        exists = await self.fetchval(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'"
        )
        if not exists:
            return 0
        return await self.fetchval("SELECT coalesce(max(version), 0) FROM schema_version", default=0)

    async def upgrade(self, migrations: list[Migration] | None = None, target: int | None = None) -> list[int]:
        """Apply every pending migration in order, each in its own transaction."""
        migrations = discover_migrations() if migrations is None else migrations
        latest = migrations[-1].version if migrations else 0
        current = await self.current_version()
        if current > latest:
            raise SchemaTooNew(
                f"database {self.path} has schema version {current}, newer than this bot "
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
                for stmt in mig.statements():
                    await conn.execute(stmt)
                await conn.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, datetime('now'))",
                    (mig.version, mig.name),
                )
            applied.append(mig.version)
        return applied


class DatabaseUnusable(Exception):
    """The database file cannot be opened, or (when the bot will write) cannot be written."""


async def _prove_writable(db: Database) -> None:
    """A write that is rolled back: a read-only file (or file system) fails here, at start,
    rather than on the first message stored."""
    async with db._lock:
        await db.conn.execute("BEGIN IMMEDIATE")
        try:
            await db.conn.execute("CREATE TABLE _write_probe(x)")
        finally:
            await db.conn.execute("ROLLBACK")


# SQLite errors that say the file itself cannot be used (rather than a bug in a statement).
_UNUSABLE = ("readonly", "unable to open", "disk i/o", "file is not a database", "disk is full")


def _unusable(err: Exception) -> bool:
    return isinstance(err, OSError) or any(m in str(err).lower() for m in _UNUSABLE)


def _fix(err: Exception) -> str:
    if "not a database" in str(err):
        return "database.path must name an SQLite database of the bot, or a file that does not exist yet"
    return "make the file and its folder writable for the bot's user, or set database.path to another file"


async def open_database(path: str | Path, upgrade: bool = True) -> Database:
    """Open ``path``; with ``upgrade``, apply pending migrations and prove the file writable.
    A file that cannot be opened or written raises DatabaseUnusable: one line naming it."""
    try:
        db = await Database.open(path)
    except (sqlite3.DatabaseError, OSError) as err:
        if not _unusable(err):
            raise
        raise DatabaseUnusable(f"cannot open the database {path}: {err}; {_fix(err)}") from None
    if upgrade:
        try:
            if not await db.upgrade():  # nothing applied, so nothing written yet: prove it can be
                await _prove_writable(db)
        except BaseException as err:
            await db.close()
            if isinstance(err, (sqlite3.DatabaseError, OSError)) and _unusable(err):
                raise DatabaseUnusable(f"cannot write the database {path}: {err}; {_fix(err)}") from None
            raise
    return db
