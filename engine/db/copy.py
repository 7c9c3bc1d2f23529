"""Move a bot's SQLite database into an empty PostgreSQL database (`python -m bot db migrate-to`).

The target is brought to the source's schema version with the PostgreSQL migrations, then every
table the schema has is copied in foreign-key order (parents first), in batches, inside one
transaction on each side: the source is read from one snapshot and the target either receives
everything or nothing, so a failed copy can simply be run again. Values are converted to what
the target column takes (asyncpg is strict about types; vectors stay float32 bytes, which the
backend's codec writes as pgvector values). SQLite's implicit rowid fills the tables' explicit
``rowid`` columns, identity sequences are moved past the copied keys, and every table's row count
is compared before the commit. Then the target is analysed: without statistics the planner
guesses at tables it has just seen filled, until autovacuum gets to them.

Refused with one line (``CopyRefused``), nothing written: a target holding rows or tables that
are not the bot's, or a schema version other than the source's, and a source without a schema.
The source file is only read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.db.base import Database, SchemaTooNew

BATCH_ROWS = 1000
# Tables written by the triggers of other tables (the scope stamps, each scope's search
# statistics): copied last, replacing what the triggers wrote while their tables were copied, so
# they hold the source's values.
TRIGGER_WRITTEN = ("memory_scope_stamps", "memory_search_stats")
_INTEGER = {"bigint", "integer", "smallint"}
_FLOAT = {"double precision", "real"}

Progress = Callable[[str, int, int], None]   # (table, rows copied so far, rows in the table)


class CopyRefused(Exception):
    """The copy cannot start or did not verify; one line that says why and what to do."""


@dataclass(frozen=True)
class Column:
    name: str
    pg_type: str      # information_schema data_type, or the udt name for user types (vector)
    identity: bool


@dataclass(frozen=True)
class TablePlan:
    name: str
    columns: list[Column]
    always_identity: bool   # a GENERATED ALWAYS column: the INSERT must override it

    def insert_sql(self) -> str:
        names = ", ".join(f'"{c.name}"' for c in self.columns)
        overriding = " OVERRIDING SYSTEM VALUE" if self.always_identity else ""
        return (f'INSERT INTO "{self.name}" ({names}){overriding} '
                f"VALUES ({', '.join('?' * len(self.columns))})")

    def select_sql(self) -> str:
        """A batch of source rows after a rowid, the rowid first (SQLite's implicit one fills a
        ``rowid`` column of the target: insertion order for ties)."""
        names = ", ".join("rowid" if c.name == "rowid" else f'"{c.name}"' for c in self.columns)
        return f'SELECT rowid, {names} FROM "{self.name}" WHERE rowid > ? ORDER BY rowid LIMIT ?'


async def target_tables(target: Database) -> list[str]:
    rows = await target.fetchall(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
    return [r[0] for r in rows]


async def check_target(target: Database, version: int) -> None:
    """Refuse a target that holds anything but the bot's empty schema at ``version`` (or nothing)."""
    tables = await target_tables(target)
    if not tables:
        return
    if "schema_version" not in tables:
        raise CopyRefused(f"the target database {target.label} holds tables that are not the bot's "
                          f"({', '.join(tables[:5])}); create an empty database for the bot")
    found = await target.current_version()
    if found not in (0, version):
        raise CopyRefused(f"the target database {target.label} has schema version {found}, the SQLite "
                          f"database {version}; bring both to one version with `python -m bot db upgrade` "
                          "or use an empty database")
    for table in tables:
        if table == "schema_version":
            continue
        rows = await target.fetchval(f'SELECT count(*) FROM "{table}"')
        if rows:
            raise CopyRefused(f"the target database {target.label} is not empty: table {table} holds {rows} "
                              "rows; migrate-to only copies into an empty database")


async def _source_tables(source: Database) -> set[str]:
    """The source's own tables: FTS5 indexes and their shadow tables aside (PostgreSQL keeps a
    generated tsvector column instead), and SQLite's internal ones."""
    rows = await source.fetchall("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    fts = [r["name"] for r in rows if (r["sql"] or "").startswith("CREATE VIRTUAL")]
    return {r["name"] for r in rows if not r["name"].startswith("sqlite_")
            and not any(r["name"] == f or r["name"].startswith(f + "_") for f in fts)}


async def plan_tables(source: Database, target: Database) -> list[TablePlan]:
    """What to copy, in an order that puts every referenced table before those that reference it."""
    names = [t for t in await target_tables(target) if t != "schema_version"]
    missing = sorted((await _source_tables(source)) - set(names) - {"schema_version"})
    if missing:
        raise CopyRefused(f"the target schema lacks the SQLite tables {', '.join(missing)}; "
                          "the two schemas differ")
    cols = await target.fetchall(
        "SELECT table_name, column_name, data_type, udt_name, is_identity, identity_generation "
        "FROM information_schema.columns WHERE table_schema = current_schema() AND is_generated = 'NEVER' "
        "ORDER BY table_name, ordinal_position")
    plans = {}
    for table in names:
        mine = [c for c in cols if c["table_name"] == table]
        source_cols = {r["name"] for r in await source.fetchall(f'PRAGMA table_info("{table}")')}
        lacking = [c["column_name"] for c in mine
                   if c["column_name"] not in source_cols and c["column_name"] != "rowid"]
        if lacking:
            raise CopyRefused(f"the SQLite table {table} lacks the columns {', '.join(lacking)}; "
                              "the two schemas differ")
        plans[table] = TablePlan(
            table,
            [Column(c["column_name"], c["udt_name"] if c["data_type"] == "USER-DEFINED" else c["data_type"],
                    c["is_identity"] == "YES") for c in mine],
            any(c["identity_generation"] == "ALWAYS" for c in mine))
    refs = await target.fetchall(
        "SELECT c.relname AS child, p.relname AS parent FROM pg_constraint k "
        "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid "
        "WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace")
    parents: dict[str, set[str]] = {t: set() for t in names}
    for r in refs:
        if r["child"] != r["parent"]:
            parents[r["child"]].add(r["parent"])
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [t for t in names if t not in ordered and parents[t] <= set(ordered)]
        if not ready:
            raise CopyRefused(f"the foreign keys of {sorted(set(names) - set(ordered))} form a cycle")
        ordered += sorted(ready)
    ordered = [t for t in ordered if t not in TRIGGER_WRITTEN] + [t for t in ordered if t in TRIGGER_WRITTEN]
    return [plans[t] for t in ordered]


def _convert(value: Any, column: Column) -> Any:
    """A SQLite value as the target column's type takes it (SQLite stores what it is given)."""
    if value is None:
        return None
    kind = column.pg_type
    if kind == "text":
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    if kind in _INTEGER:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        return int(value)
    if kind in _FLOAT:
        return float(value)
    if kind == "boolean":
        return bool(value)
    if kind in ("bytea", "vector"):   # vectors: little-endian float32 bytes, the codec's input
        return bytes(value)
    if kind == "numeric":
        return str(value)
    return value


def _converted(plan: TablePlan, rows: list) -> list[tuple]:
    out = []
    for row in rows:
        values = []
        for i, column in enumerate(plan.columns, start=1):
            try:
                values.append(_convert(row[i], column))
            except (TypeError, ValueError, UnicodeDecodeError):
                raise CopyRefused(f"{plan.name}.{column.name} of the row with rowid {row[0]} holds "
                                  f"{row[i]!r}, which a {column.pg_type} column cannot take; fix the row "
                                  "in SQLite and run migrate-to again") from None
        out.append(tuple(values))
    return out


async def _copy_table(src, dst, plan: TablePlan, batch: int, progress: Progress) -> int:
    async with src.execute(f'SELECT count(*) FROM "{plan.name}"') as cur:
        total = (await cur.fetchone())[0]
    if plan.name in TRIGGER_WRITTEN:
        await dst.execute(f'DELETE FROM "{plan.name}"')
    done, after = 0, 0
    progress(plan.name, 0, total)
    while True:
        async with src.execute(plan.select_sql(), (after, batch)) as cur:
            rows = await cur.fetchall()
        if not rows:
            break
        await dst.executemany(plan.insert_sql(), _converted(plan, rows))
        done, after = done + len(rows), rows[-1][0]
        progress(plan.name, done, total)
    return total


async def _advance_sequences(dst, plans: list[TablePlan]) -> None:
    """Inserting explicit keys leaves an identity's sequence where it was: move it past them."""
    for plan in plans:
        for column in plan.columns:
            if column.identity:
                await dst.execute(
                    f'SELECT setval(pg_get_serial_sequence(CAST(? AS TEXT), CAST(? AS TEXT)), '
                    f'coalesce(max("{column.name}"), 0) + 1, false) FROM "{plan.name}"',
                    (plan.name, column.name))


async def _verify(src, dst, plans: list[TablePlan]) -> dict[str, int]:
    counts = {}
    for plan in plans:
        sql = f'SELECT count(*) FROM "{plan.name}"'
        async with src.execute(sql) as cur:
            want = (await cur.fetchone())[0]
        async with dst.execute(sql) as cur:
            got = (await cur.fetchone())[0]
        if want != got:
            raise CopyRefused(f"table {plan.name}: {got} rows arrived of {want}; nothing was kept, "
                              "run migrate-to again")
        counts[plan.name] = got
    return counts


async def copy_database(source: Database, target: Database, batch: int = BATCH_ROWS,
                        progress: Progress = lambda table, done, total: None) -> dict[str, int]:
    """Copy the SQLite ``source`` into the empty PostgreSQL ``target`` (see the module docstring);
    returns the rows per table."""
    if source.dialect != "sqlite" or target.dialect != "postgresql":
        raise CopyRefused("migrate-to copies an SQLite database into a PostgreSQL one")
    version = await source.current_version()
    if version == 0:
        raise CopyRefused(f"the SQLite database {source.label} has no schema yet: nothing to move")
    known = target.migrations()[-1].version
    if version > known:
        raise SchemaTooNew(f"the SQLite database {source.label} has schema version {version}, newer than "
                           f"this bot knows ({known}); upgrade the bot first")
    await check_target(target, version)
    await target.upgrade(target=version)
    plans = await plan_tables(source, target)
    async with source.transaction() as src, target.transaction() as dst:   # one snapshot; all or nothing
        for plan in plans:
            await _copy_table(src, dst, plan, batch, progress)
        await _advance_sequences(dst, plans)
        counts = await _verify(src, dst, plans)
    await target.execute("ANALYZE")
    return counts
