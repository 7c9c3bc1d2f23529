"""`python -m bot db upgrade|current|migrate-to` as a user runs them: subprocesses on a config
file. `upgrade` and `current` on PostgreSQL (test_console runs them on SQLite); `migrate-to` moves
a used SQLite database (memory, beliefs, jobs, a simulation) into PostgreSQL, after which the bot
opened there recalls the same messages and keeps writing. The refusals (a non-empty target,
another schema version, bad input: one line, exit 2) go through the same entry point in this
process, since each bot process costs its imports (about 4 CPU seconds)."""
from __future__ import annotations

import asyncio
import re
import subprocess
from datetime import datetime, timezone

import pytest

from bot.app import App
from bot.cli import main
from engine.config import parse_config
from engine.db import discover_migrations, open_database
from engine.memory.beliefs import NewBelief, store
from engine.sim import records
from tests.conftest import REPO, bot_command, bot_env
from tests.helpers.chat import Person
from tests.helpers.config import MINILM, write_config

LATEST = discover_migrations()[-1].version
FEATURES = ["bot.features.core", "bot.features.memory"]


def db_config(tmp_path, db_url: str = "") -> str:
    return str(write_config(tmp_path, {"database": {"url": db_url}}))


def run_bot(tmp_path, *args: str, db_url: str = ""):
    return subprocess.run(bot_command("--config", db_config(tmp_path, db_url), *args), capture_output=True,
                          text=True, timeout=120, cwd=REPO, env=bot_env())


def refused(tmp_path, capsys, *args: str) -> str:
    """The one line `python -m bot db <args>` refuses with (exit status 2)."""
    assert main(["--config", db_config(tmp_path), "db", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


async def test_db_current_and_upgrade_on_postgresql(tmp_path, pg_server, capsys):
    url = await pg_server.fresh_database()
    assert await asyncio.to_thread(main, ["--config", db_config(tmp_path, url), "db", "current"]) == 0
    assert capsys.readouterr().out.startswith("0 (this bot knows up to")   # `current` does not upgrade
    out = run_bot(tmp_path, "db", "upgrade", db_url=url)
    assert out.returncode == 0 and f"schema version {LATEST}" in out.stdout, out.stderr
    out = run_bot(tmp_path, "db", "current", db_url=url)
    assert out.stdout.strip() == str(LATEST)


def app_config(tmp_path, db_url: str = ""):
    return parse_config({"bot": {"data_dir": str(tmp_path / "data")}, "database": {"url": db_url}, **MINILM,
                         "memory": {"base_threshold": 0.3}}, str(tmp_path / "config.toml"))  # a MiniLM threshold


async def used_sqlite_database(tmp_path) -> str:
    """Fill the SQLite database of tmp_path's config as the bot would; the /recall answer it gives."""
    app = await App.create(app_config(tmp_path), features=FEATURES)
    await app.start()
    try:
        bob = Person(app, "bob")
        for line in ["how do I read a csv file with pandas", "pandas read_csv takes a sep argument",
                     "my sourdough bread did not rise in the oven"]:
            await bob.say(line)
        await app.settled()
        await app.memory.embedded()   # a belief is homed in its sources' world: they are routed first
        ids = [r["id"] for r in await app.db.fetchall("SELECT id FROM memory_messages ORDER BY id")]
        vec = app.embedder.model.encode(["read_csv takes sep"])
        async with app.db.transaction() as conn:
            await store(conn, "console:test", [NewBelief("read_csv", "takes", "sep", 0.9, False, ids[:2],
                                                          datetime.now(timezone.utc))], vec,
                        datetime.now(timezone.utc))
        doc = tmp_path / "news.txt"
        doc.write_text("The city raises bus fares.")
        sim_id, _ = await records.create(app.db, app.config, [doc], "who protests?", "console:test", "general")
        await records.record_step(app.db, sim_id, "ontology", {"types": 3}, 1, 100)

        async def note(ctx) -> dict:
            return {"ok": True}
        app.jobs.register("note", note)
        job = await app.jobs.submit("note", {}, "console:test", "general", title="a note")
        await app.jobs.wait(job.id)
        return await bob.say("/recall reading csv files in pandas")
    finally:
        await app.close()


async def counts(url: str) -> dict[str, int]:
    db = await open_database(url, upgrade=False)
    try:
        return {t: await db.fetchval(f"SELECT count(*) FROM {t}") for t in
                ("memory_messages", "worlds", "beliefs", "jobs", "simulations", "sim_steps", "memory_scope_stamps")}
    finally:
        await db.close()


async def vectors(url: str) -> dict:
    """Every stored vector (float32 bytes on both backends) and the stamps, by key."""
    db = await open_database(url, upgrade=False)
    try:
        return {"worlds": {r[0]: r[1] for r in await db.fetchall("SELECT id, centroid FROM worlds")},
                "messages": {r[0]: r[1] for r in await db.fetchall("SELECT id, embedding FROM memory_messages")},
                "beliefs": {r[0]: r[1] for r in await db.fetchall("SELECT id, embedding FROM beliefs")},
                "stamps": {r[0]: r[1] for r in await db.fetchall("SELECT scope, stamp FROM memory_scope_stamps")}}
    finally:
        await db.close()


async def analysed(url: str, table: str) -> bool:
    """Has ANALYZE been run on ``table`` by hand (autovacuum's own runs are counted apart)?"""
    db = await open_database(url, upgrade=False)
    try:
        return await db.fetchval("SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname=?",
                                 (table,))
    finally:
        await db.close()


def recalled(answer: str) -> list[str]:
    return sorted(line for line in answer.splitlines() if "pandas" in line or "csv" in line)


async def test_migrate_to_moves_a_used_database_and_the_bot_recalls_there(tmp_path, pg_server, capsys):
    before = await used_sqlite_database(tmp_path)
    assert "read_csv takes a sep argument" in before
    sqlite_url = f"sqlite:///{tmp_path / 'data' / 'bot.sqlite3'}"
    want = await counts(sqlite_url)
    assert all(want.values()), want
    url = await pg_server.fresh_database()

    out = run_bot(tmp_path, "db", "migrate-to", url, "--batch", "2")
    assert out.returncode == 0, out.stderr
    assert "  memory_messages: 2/3 rows" in out.stdout and "  memory_messages: 3/3 rows" in out.stdout
    lines = out.stdout.splitlines()
    assert lines.index("  worlds: 2/2 rows") < lines.index("  memory_messages: 3/3 rows")   # parents first
    assert f'url = "{url.replace(":@", "@")}"' in out.stdout and "row counts verified" in out.stdout
    assert await counts(url) == want == await counts(sqlite_url)   # the source is unchanged
    assert await vectors(url) == await vectors(sqlite_url)
    assert await analysed(url, "memory_messages")   # the planner has statistics from the first query

    app = await App.create(app_config(tmp_path, url), features=FEATURES)
    await app.start()
    try:
        bob = Person(app, "carol")   # another name: platform message ids of bob-n are taken
        after = await bob.say("/recall reading csv files in pandas")
        assert recalled(after) == recalled(before) and "read_csv takes a sep argument" in after
        await bob.say("pandas merge is confusing")   # new keys come after the copied ones
        await app.settled()
        ids = [r["id"] for r in await app.db.fetchall("SELECT id FROM memory_messages ORDER BY id")]
        assert len(ids) == 4 and ids[-1] == ids[-2] + 1
        worlds = "\n".join(w.topic for w in await app.memory.worlds("console:test"))
        assert worlds
    finally:
        await app.close()

    assert "is not empty: table" in await asyncio.to_thread(refused, tmp_path, capsys, "migrate-to", url)
    assert await counts(url) == {**want, "memory_messages": 4}


async def test_migrate_to_refuses_another_schema_version(tmp_path, pg_server, capsys):
    await (await open_database(f"sqlite:///{tmp_path / 'data' / 'bot.sqlite3'}")).close()   # at the latest version
    url = await pg_server.fresh_database()
    db = await open_database(url, upgrade=False)
    try:
        await db.upgrade(target=LATEST - 1)
    finally:
        await db.close()
    err = await asyncio.to_thread(refused, tmp_path, capsys, "migrate-to", url)
    assert re.fullmatch(rf"error: the target database .* has schema version {LATEST - 1}, the SQLite database "
                        rf"{LATEST}; .*\n", err)


async def test_a_row_postgresql_cannot_take_is_named_and_nothing_is_kept(tmp_path, pg_server, capsys):
    db = await open_database(f"sqlite:///{tmp_path / 'data' / 'bot.sqlite3'}")
    try:
        await db.execute("INSERT INTO channel_settings(scope, channel, key, value) VALUES ('s', 'c', 'memory', 'off')")
        await db.execute("INSERT INTO jobs(id, kind, scope, state, progress, created_at, updated_at) "
                         "VALUES ('j1', 'note', 's', 'done', 'lots', 'now', 'now')")   # SQLite keeps the text
    finally:
        await db.close()
    url = await pg_server.fresh_database()
    err = await asyncio.to_thread(refused, tmp_path, capsys, "migrate-to", url)
    assert "jobs.progress of the row with rowid 1 holds 'lots'" in err
    target = await open_database(url, upgrade=False)
    try:   # channel_settings was copied before jobs, in the transaction that was rolled back
        assert await target.fetchval("SELECT count(*) FROM channel_settings") == 0
    finally:
        await target.close()


@pytest.mark.parametrize("args, message", [
    (["sqlite:///x.db"], "is not a PostgreSQL URL"),
    (["postgresql://nobody@127.0.0.1:1/none"], "there is no SQLite database at"),
    (["postgresql://nobody@127.0.0.1:1/none", "--batch", "0"], "--batch must be at least 1"),
])
def test_migrate_to_bad_input_is_one_line(tmp_path, capsys, args, message):
    assert message in refused(tmp_path, capsys, "migrate-to", *args)
