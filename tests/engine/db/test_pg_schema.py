"""The PostgreSQL schema is the SQLite schema: after every migration, each SQLite table (FTS5
tables aside) exists on PostgreSQL with the same columns, compatible types, nullability and
defaults, the same primary keys, foreign keys and their ON DELETE, CHECK value lists, indexes
(unique and partial ones too), generated token counts, and scope-stamp and search-statistics
triggers; the migrations that repair rows leave
the same rows on both. A migration added for SQLite without its PostgreSQL twin
(migrations/postgresql/) fails here. Both databases are real: SQLite files upgraded by engine.db
and databases on a PostgreSQL 18 server (tests/helpers/pg_server.py), both through open_database."""
from __future__ import annotations

import asyncio
import re

import pytest

from engine.db import Database, open_database

# SQLite declared type -> the PostgreSQL types that hold the same values (vectors are float32 BLOBs).
# The migration runner's own table (engine/db/base.py), the same on both but made by no migration.
RUNNER_TABLE = "schema_version"
COMPATIBLE = {"INTEGER": {"bigint"}, "REAL": {"double precision"}, "TEXT": {"text"}, "BLOB": {"vector", "bytea"}}


def _norm(sql: str | None) -> str | None:
    """An expression as both databases would write it: no casts, brackets, quotes of names or case."""
    if sql is None:
        return None
    sql = re.sub(r"::[a-z ]+(\[\])?", "", sql.lower())
    return re.sub(r"[()\s\"]", "", sql)


def _literals(sql: str) -> set[str]:
    return set(re.findall(r"'((?:[^']|'')*)'", sql))


async def sqlite_schema(path) -> dict:
    db = await open_database(path)
    try:
        master = await db.fetchall("SELECT type, name, tbl_name, sql FROM sqlite_master")
        fts = [r["name"] for r in master if r["type"] == "table" and (r["sql"] or "").startswith("CREATE VIRTUAL")]
        tables = sorted(r["name"] for r in master if r["type"] == "table" and r["name"] != RUNNER_TABLE
                        and not r["name"].startswith("sqlite_") and not any(r["name"].startswith(f) for f in fts))
        out: dict = {"tables": set(tables), "columns": {}, "generated": set(), "pk": {}, "fk": set(), "checks": {},
                     "indexes": {}, "triggers": set()}
        for t in tables:
            cols = await db.fetchall(f"PRAGMA table_info({t})")
            for c in cols:
                out["columns"][t, c["name"]] = (c["type"].upper(), bool(c["notnull"] or c["pk"]),
                                                _norm(c["dflt_value"]))
            out["pk"][t] = tuple(c["name"] for c in sorted(cols, key=lambda c: c["pk"]) if c["pk"])
            out["generated"] |= {(t, c["name"], c["type"].upper())   # hidden 2 or 3: generated
                                 for c in await db.fetchall(f"PRAGMA table_xinfo({t})") if c["hidden"] in (2, 3)}
            for f in await db.fetchall(f"PRAGMA foreign_key_list({t})"):
                out["fk"].add((t, f["from"], f["table"], f["to"], f["on_delete"]))
            sql = next(r["sql"] for r in master if r["name"] == t)
            for col, values in re.findall(r"(\w+) IN \(([^)]*)\)", sql):
                out["checks"][t, col] = _literals(values)
            for ix in await db.fetchall(f"PRAGMA index_list({t})"):
                if ix["origin"] == "pk":
                    continue
                indexed = tuple(c["name"] for c in await db.fetchall(f"PRAGMA index_info({ix['name']})"))
                sql = next(r["sql"] for r in master if r["name"] == ix["name"])
                where = re.search(r"\bWHERE\b(.*)$", sql or "", re.S)
                out["indexes"][ix["name"]] = (t, indexed, bool(ix["unique"]), _norm(where.group(1)) if where else None)
        out["triggers"] = {(r["tbl_name"], r["name"]) for r in master if r["type"] == "trigger"
                           and not any(f in r["sql"] for f in fts)}
        return out
    finally:
        await db.close()


async def pg_schema(db: Database) -> dict:
    out: dict = {"columns": {}, "generated": set(), "pk": {}, "fk": set(), "checks": {}, "indexes": {},
                 "triggers": set()}
    for c in await db.fetchall("SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default, "
                               "is_generated FROM information_schema.columns"
                               " WHERE table_schema = 'public' AND table_name <> ?", (RUNNER_TABLE,)):
        kind = c["udt_name"] if c["data_type"] == "USER-DEFINED" else c["data_type"]
        if c["is_generated"] == "ALWAYS":
            out["generated"].add((c["table_name"], c["column_name"], kind))
        else:
            out["columns"][c["table_name"], c["column_name"]] = (kind, c["is_nullable"] == "NO",
                                                                 _norm(c["column_default"]))
    out["tables"] = {t for t, _ in out["columns"]}
    constraints = await db.fetchall(
        "SELECT c.contype::text AS contype, t.relname AS tbl, c.confdeltype::text AS confdeltype, r.relname AS ref, "
        "pg_get_constraintdef(c.oid) AS def, "
        "ARRAY(SELECT attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a "
        "      ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) AS cols, "
        "ARRAY(SELECT attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a "
        "      ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i) AS refcols "
        "FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid LEFT JOIN pg_class r ON r.oid = c.confrelid "
        "WHERE t.relnamespace = 'public'::regnamespace")
    on_delete = {"a": "NO ACTION", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT", "r": "RESTRICT"}
    for c in constraints:
        if c["tbl"] == RUNNER_TABLE:
            continue
        if c["contype"] == "p":
            out["pk"][c["tbl"]] = tuple(c["cols"])
        elif c["contype"] == "f":
            out["fk"].add((c["tbl"], c["cols"][0], c["ref"], c["refcols"][0], on_delete[c["confdeltype"]]))
        elif c["contype"] == "c":
            out["checks"][c["tbl"], c["cols"][0]] = _literals(c["def"])
    for ix in await db.fetchall(
            "SELECT i.relname AS name, t.relname AS tbl, x.indisunique, x.indisprimary, am.amname, "
            "pg_get_expr(x.indpred, x.indrelid) AS pred, "
            "ARRAY(SELECT attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a "
            "      ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o) AS cols "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
            "JOIN pg_am am ON am.oid = i.relam WHERE t.relnamespace = 'public'::regnamespace"):
        if not ix["indisprimary"] and ix["tbl"] != RUNNER_TABLE:
            out["indexes"][ix["name"]] = (ix["tbl"], tuple(ix["cols"]), ix["indisunique"], _norm(ix["pred"]),
                                          ix["amname"])
    out["triggers"] = {(r["tbl"], r["tgname"]) for r in await db.fetchall(
        "SELECT c.relname AS tbl, g.tgname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid "
        "WHERE NOT g.tgisinternal AND c.relnamespace = 'public'::regnamespace")}
    return out


async def both_schemas(pg_server, sqlite_path) -> tuple[dict, dict]:
    db = await open_database(await pg_server.fresh_database())
    try:
        pg = await pg_schema(db)
    finally:
        await db.close()
    return await sqlite_schema(sqlite_path), pg


@pytest.fixture(scope="module")
def schemas(pg_server, tmp_path_factory):
    return asyncio.run(both_schemas(pg_server, tmp_path_factory.mktemp("lite") / "db.sqlite3"))


async def test_every_table_and_column_exists_with_a_compatible_type(schemas):
    lite, pg = schemas
    assert lite["tables"] - pg["tables"] == set(), "tables missing on PostgreSQL"
    assert pg["tables"] - lite["tables"] == set(), "tables only on PostgreSQL"
    for (table, column), (kind, notnull, default) in lite["columns"].items():
        assert (table, column) in pg["columns"], f"{table}.{column} is missing on PostgreSQL"
        pg_kind, pg_notnull, pg_default = pg["columns"][table, column]
        assert pg_kind in COMPATIBLE[kind], f"{table}.{column}: {kind} on SQLite, {pg_kind} on PostgreSQL"
        assert pg_notnull == notnull, f"{table}.{column}: NOT NULL differs"
        assert pg_default == default, f"{table}.{column}: default {default} on SQLite, {pg_default} on PostgreSQL"
    # SQLite's implicit rowid, made explicit where the engine orders by it.
    rowids = {(t, "rowid") for t in ("jobs", "simulations", "sim_steps")}
    assert set(pg["columns"]) - set(lite["columns"]) == rowids, \
        "columns only on PostgreSQL"


async def test_keys_checks_and_cascades_are_the_same(schemas):
    lite, pg = schemas
    assert pg["pk"] == lite["pk"]
    assert pg["fk"] == lite["fk"]
    assert pg["checks"] == lite["checks"]


async def test_indexes_and_stamp_triggers_are_the_same(schemas):
    lite, pg = schemas
    for name, (table, cols, unique, where) in lite["indexes"].items():
        assert name in pg["indexes"], f"index {name} is missing on PostgreSQL"
        assert pg["indexes"][name][:4] == (table, cols, unique, where), name
    extra = {n: ix for n, ix in pg["indexes"].items() if n not in lite["indexes"]}
    # the full-text side: one GIN index per generated tsvector column (with its token count), in
    # place of an FTS5 table, and the statistics FTS5 keeps in its own tables
    tsv = {(t, c) for t, c, kind in pg["generated"] if kind == "tsvector"}
    assert {(ix[0], ix[1], ix[4]) for ix in extra.values()} == {(t, (c,), "gin") for t, c in tsv}
    assert {(t, c, kind) for t, c, kind in pg["generated"] if (t, c) not in tsv} == \
        {(t, "search_len", "integer") for t, _ in tsv}
    assert {(t, c) for t, c, kind in lite["generated"]} == {(t, "search_len") for t, _ in tsv}
    # each scope's search statistics: one plpgsql trigger a table, three SQLite ones (insert,
    # delete, update); PostgreSQL's change notices (LISTEN/NOTIFY) have no SQLite counterpart:
    # data_version there
    stats = {(t, n.removesuffix("_ai")) for t, n in lite["triggers"] if n.endswith("_search_stats_ai")}
    assert stats == {(t, n) for t, n in pg["triggers"] if n.endswith("_search_stats")} == \
        {(t, f"{t}_search_stats") for t, _ in tsv}
    assert {t for t in pg["triggers"] if not t[1].endswith(("_notify_changes", "_search_stats"))} == \
        {t for t in lite["triggers"] if not t[1].endswith(("_search_stats_ai", "_search_stats_ad", "_search_stats_au"))}


async def test_stamps_and_full_text_follow_writes_on_postgresql(pg_server):
    db = await open_database(await pg_server.fresh_database())
    vec = bytes(8)
    try:
        await db.execute("INSERT INTO worlds(id, scope, centroid, created_at, last_active)"
                         " VALUES ('w1', 's', ?, 'n', 'n')", (vec,))
        async with db.transaction() as conn:
            async with conn.execute(
                    "INSERT INTO memory_messages(scope, world_id, channel, message_id, author, text, search_text, ts, "
                    "embedding) VALUES ('s', 'w1', 'c', 'm1', 'Anna', 'x', 'researching marathons on 7 May 2023', "
                    "'n', ?) RETURNING id", (vec,)) as cur:
                mid = (await cur.fetchone())["id"]
        assert await db.fetchval("SELECT stamp FROM memory_scope_stamps WHERE scope='s'") == 2
        await db.execute("UPDATE memory_messages SET search_terms = 'anna research marathon 7 mai 2023' WHERE id = ?",
                         (mid,))
        found = "SELECT id FROM memory_messages WHERE search_tsv @@ ?::tsquery"
        assert await db.fetchval(found, ("'scope:s' & ('research' | 'zebra')",)) == mid   # within its scope
        assert await db.fetchval(found, ("'scope:t' & 'research'",)) is None
        assert await db.fetchval(found, ("'mai' <-> '2023'",)) == mid                     # a date, as a phrase
        assert await db.fetchval("SELECT docs || ' ' || tokens FROM memory_search_stats WHERE scope = 's' "
                                 "AND tbl = 'memory_messages'") == "1 7"                   # 6 tokens and the scope's
        await db.execute("UPDATE memory_messages SET search_terms = 'zebra' WHERE id = ?", (mid,))
        assert await db.fetchval(found, ("'research'",)) is None
        assert await db.fetchval("SELECT tokens FROM memory_search_stats WHERE scope = 's'") == 2
        await db.execute("DELETE FROM worlds WHERE id = 'w1'")               # cascades to its messages
        assert await db.fetchval("SELECT count(*) FROM memory_messages") == 0
        assert await db.fetchval("SELECT docs + tokens FROM memory_search_stats WHERE scope = 's'") == 0
        assert await db.fetchval("SELECT stamp FROM memory_scope_stamps WHERE scope='s'") == 4
    finally:
        await db.close()


# Rows written before 0014/0015: a newer belief (1) ended by an older statement extracted later (2),
# a belief (3) ended by one superseded since (4), and a message not yet fitted.
OLD_ROWS = [
    "INSERT INTO worlds(id, scope, centroid, created_at, last_active) VALUES ('w1', 's', ?, 'n', 'n')",
    "INSERT INTO memory_messages(id, scope, world_id, channel, message_id, author, text, ts, embedding) "
    "VALUES (7, 's', 'w1', 'c', 'm7', 'Anna', 'yesterday I ran a marathon', '2023-05-08', ?)",
    *(f"INSERT INTO beliefs(id, scope, world_id, subject, predicate, object, norm_key, norm_object, confidence, "
      f"valid_from, invalid_at, superseded_by, learned_at, decayed_at, embedding) VALUES ({i}, 's', 'w1', 'a', 'b', "
      f"'c', 'k', 'o', 0.5, '{start}', {end}, {by}, 'n', 'n', ?)"
      for i, start, end, by in ((1, "2023-05-02", "'2023-05-01'", 2), (2, "2023-05-01", "NULL", "NULL"),
                                (3, "2023-05-05", "'2023-05-03'", 4), (4, "2023-05-03", "'2023-05-06'", 5))),
]
AFTER = ("SELECT 'belief', id, coalesce(invalid_at, '-'), coalesce(superseded_by, 0) FROM beliefs UNION ALL "
         "SELECT 'message', id, search_text, (SELECT count(*) FROM memory_messages_unfitted u WHERE u.id = m.id) "
         "FROM memory_messages m ORDER BY 1, 2")


async def rows_after_repairs(url: str) -> list[tuple]:
    db = await open_database(url, upgrade=False)
    try:
        await db.upgrade(target=13)
        for sql in OLD_ROWS:
            await db.execute(sql, (bytes(8),))
        await db.upgrade()
        return [tuple(r) for r in await db.fetchall(AFTER)]
    finally:
        await db.close()


async def test_data_fixing_migrations_do_the_same_on_both(pg_server, tmp_path):
    expected = await rows_after_repairs(f"sqlite:///{tmp_path / 'old.sqlite3'}")
    assert ("belief", 1, "-", 0) in expected and ("belief", 3, "2023-05-05", 4) in expected
    assert await rows_after_repairs(await pg_server.fresh_database()) == expected
