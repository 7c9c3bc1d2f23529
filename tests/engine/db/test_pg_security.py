"""PostgreSQL connections: no password in the URL (and none shown), TLS that is not merely
opportunistic to a server elsewhere, and a statement timeout on every pooled connection, on the
real server the suite starts (tests/helpers/pg_server.py)."""
from __future__ import annotations

import logging
import time

import asyncpg
import pytest

from engine.config import ConfigError, DatabaseSection, parse_config
from engine.db import DatabaseUnusable, open_database
from engine.db.migrations import Migration
from engine.db.postgres import redacted, ssl_mode
from engine.redact import RedactingFormatter, Redactor

pytestmark = pytest.mark.timeout(60)


def test_a_password_in_the_urls_query_is_refused_and_never_shown():
    for url in ("postgresql://bot@db.internal:5432/bot?password=hunter2",
                "postgresql://bot@db.internal/bot?sslmode=require&PASSWORD=hunter2",
                "postgresql://bot:hunter2@db.internal/bot"):
        with pytest.raises(ConfigError) as caught:
            parse_config({"database": {"url": url}})
        assert "PGPASSWORD" in str(caught.value) and "hunter2" not in str(caught.value)
        assert "hunter2" not in redacted(url) and "***" in redacted(url)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "cannot reach %s", (
        "postgresql://bot@db/bot?password=hunter2&sslmode=require",), None)
    line = RedactingFormatter("%(message)s", Redactor([])).format(record)
    assert line == "cannot reach postgresql://bot@db/bot?password=***&sslmode=require"


def test_tls_is_verified_to_a_server_elsewhere_and_left_out_locally(monkeypatch):
    monkeypatch.delenv("PGSSLMODE", raising=False)
    monkeypatch.delenv("PGHOST", raising=False)
    assert ssl_mode("postgresql://bot@db.example.com:5432/bot", "auto") == "verify-full"
    assert ssl_mode("postgresql://bot@localhost,db.example.com/bot", "auto") == "verify-full"
    assert ssl_mode("postgresql://bot@/bot?host=db.example.com", "auto") == "verify-full"
    for local in ("postgresql://bot@localhost/bot", "postgresql://bot@127.0.0.1:5432/bot",
                  "postgresql://bot@[::1]:5432/bot", "postgresql://postgres:@/postgres?host=/tmp/pg",
                  "postgresql://bot@/bot"):
        assert ssl_mode(local, "auto") == "disable", local
    assert ssl_mode("postgresql://bot@db.example.com/bot?sslmode=require", "auto") is None   # the URL's own
    assert ssl_mode("postgresql://bot@localhost/bot", "require") == "require"                # as configured
    monkeypatch.setenv("PGSSLMODE", "verify-ca")
    assert ssl_mode("postgresql://bot@db.example.com/bot", "auto") is None                   # asyncpg reads it


async def test_a_remote_server_without_a_trusted_certificate_is_refused_in_one_line(tmp_path, monkeypatch):
    """The default for a host elsewhere is verify-full: without the server's CA the bot refuses to
    connect (before, asyncpg's 'prefer' would have fallen back to plain text)."""
    monkeypatch.delenv("PGSSLMODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))   # no ~/.postgresql/root.crt
    started = time.monotonic()
    with pytest.raises(DatabaseUnusable) as caught:
        await open_database("postgresql://bot@db.example.invalid:5432/bot", upgrade=False)
    assert time.monotonic() - started < 10
    text = str(caught.value)
    assert "root.crt" in text and "database.sslmode" in text and "\n" not in text


async def test_statements_time_out_but_migrations_do_not(pg_server):
    url = await pg_server.fresh_database()
    db = await open_database(url, upgrade=False, settings=DatabaseSection(statement_timeout_s=0.5, sslmode="require"))
    try:   # a Unix socket needs no TLS, whatever sslmode says
        assert await db.fetchval("SHOW statement_timeout") == "500ms"
        started = time.monotonic()
        with pytest.raises(asyncpg.QueryCanceledError):
            await db.fetchval("SELECT pg_sleep(5)")
        with pytest.raises(asyncpg.QueryCanceledError):
            async with db.transaction() as conn:
                await conn.execute("SELECT pg_sleep(5)")
        assert time.monotonic() - started < 4
        await db.execute("SELECT 1")   # the connections are fine afterwards
    finally:
        await db.close()
    default = await open_database(url, upgrade=False)
    try:
        assert await default.fetchval("SHOW statement_timeout") == "1min"   # [database] statement_timeout_s = 60
    finally:
        await default.close()


async def test_a_migration_is_not_cut_off_by_the_statement_timeout(pg_server, tmp_path):
    url = await pg_server.fresh_database()
    slow = tmp_path / "0001_slow.sql"
    slow.write_text("SELECT pg_sleep(1.2);\nCREATE TABLE t (x INTEGER);\n")
    db = await open_database(url, upgrade=False, settings=DatabaseSection(statement_timeout_s=0.5))
    try:
        assert await db.upgrade([Migration(1, "0001_slow", slow)]) == [1]
        assert await db.has_table("t")
    finally:
        await db.close()
