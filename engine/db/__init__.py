"""Storage: one interface (engine/db/base.py) over SQLite (embedded default) and PostgreSQL
(several bot processes on one server), and the numbered migrations both share.

``open_database`` takes a file path, ``sqlite:///path`` or ``postgresql://...`` and returns a
``Database``; nothing else in the engine knows which backend it talks to, except the few
statements that branch on ``db.dialect``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from engine.db.base import Database, DatabaseUnusable, SchemaTooNew
from engine.db.migrations import MIGRATIONS_DIR, Migration, discover_migrations

if TYPE_CHECKING:
    from engine.config import DatabaseSection

__all__ = ["Database", "DatabaseUnusable", "SchemaTooNew", "Migration", "MIGRATIONS_DIR",
           "discover_migrations", "open_database", "is_postgres_url"]


def is_postgres_url(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def sqlite_path(target: str | Path) -> Path:
    text = str(target)
    return Path(text[len("sqlite:///"):] if text.startswith("sqlite:///") else text)


async def open_database(target: str | Path, upgrade: bool = True,
                        settings: "DatabaseSection | None" = None) -> Database:
    """Open the database ``target`` names; with ``upgrade``, apply pending migrations (and on
    SQLite prove the file writable). One that cannot be used raises DatabaseUnusable: one line.
    ``settings``: the ``[database]`` section whose PostgreSQL options apply (TLS, statement
    timeout); its defaults without one."""
    if is_postgres_url(target):
        from engine.config import DatabaseSection
        from engine.db.postgres import open_postgres  # asyncpg only where PostgreSQL is used
        return await open_postgres(str(target), upgrade, settings or DatabaseSection())
    from engine.db.sqlite import open_sqlite
    return await open_sqlite(sqlite_path(target), upgrade)
