import sqlite3

import pytest

from engine.db import Database, SchemaTooNew, discover_migrations, open_database


async def schema(db: Database) -> set[tuple[str, str]]:
    rows = await db.fetchall(
        "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")
    return {(r["name"], " ".join(r["sql"].split())) for r in rows}


async def test_fresh_database_gets_every_migration(tmp_path):
    db = await open_database(tmp_path / "fresh.sqlite3")
    try:
        latest = discover_migrations()[-1].version
        assert await db.current_version() == latest
        assert await db.fetchval("PRAGMA journal_mode") == "wal"
        assert await db.upgrade() == []  # idempotent
    finally:
        await db.close()


@pytest.mark.parametrize("start", [m.version for m in discover_migrations()][:-1] or [None])
async def test_upgrade_from_each_earlier_version(tmp_path, start):
    if start is None:
        pytest.skip("only one migration exists")
    fresh = await open_database(tmp_path / "fresh.sqlite3")
    old = await open_database(tmp_path / "old.sqlite3", upgrade=False)
    try:
        assert await old.upgrade(target=start) == list(range(1, start + 1))
        assert await old.current_version() == start
        applied = await old.upgrade()
        assert applied == [m.version for m in discover_migrations() if m.version > start]
        assert await schema(old) == await schema(fresh)
    finally:
        await fresh.close()
        await old.close()


async def test_newer_database_is_refused(tmp_path):
    path = tmp_path / "new.sqlite3"
    db = await open_database(path)
    latest = await db.current_version()
    await db.execute("INSERT INTO schema_version(version, name, applied_at) VALUES (?, 'future', 'now')",
                     (latest + 1,))
    await db.close()
    with pytest.raises(SchemaTooNew, match=f"version {latest + 1}, newer"):
        await open_database(path)


async def test_failed_migration_rolls_back(tmp_path):
    mig_dir = tmp_path / "migs"
    mig_dir.mkdir()
    (mig_dir / "0001_ok.sql").write_text("CREATE TABLE a(x INTEGER);\n")
    (mig_dir / "0002_bad.sql").write_text("CREATE TABLE b(x INTEGER);\nINSERT INTO nope VALUES (1);\n")
    db = await open_database(tmp_path / "x.sqlite3", upgrade=False)
    try:
        with pytest.raises(sqlite3.OperationalError):
            await db.upgrade(discover_migrations(mig_dir))
        assert await db.current_version() == 1
        tables = {r[0] for r in await db.fetchall("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "a" in tables and "b" not in tables
    finally:
        await db.close()


def test_migration_files_are_numbered_without_gaps(tmp_path):
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0003_c.sql").write_text("SELECT 1;")
    with pytest.raises(ValueError, match="without gaps"):
        discover_migrations(tmp_path)
