"""Numbered SQL migrations, one sequence for every backend.

``migrations/NNNN_name.sql`` is the schema change; where PostgreSQL needs other SQL (types,
identity keys, tsvector instead of FTS5, plpgsql triggers) ``migrations/postgresql/NNNN_name.sql``
replaces it for that dialect. Numbers and names are shared, so ``schema_version`` means the same
thing on both and `db current` compares databases of either kind. A dialect file without its
shared twin is refused: a PostgreSQL-only version would let the two schemas drift apart.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "migrations"
DIALECTS = ("sqlite", "postgresql")
_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def script(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def statements(self) -> list[str]:
        """Split an SQLite file into complete statements (triggers with BEGIN..END stay whole)."""
        out, buf = [], ""
        for line in self.script().splitlines(keepends=True):
            buf += line
            if sqlite3.complete_statement(buf):
                if buf.strip():
                    out.append(buf.strip())
                buf = ""
        if buf.strip() and not buf.strip().startswith("--"):
            raise ValueError(f"{self.path.name}: incomplete statement at end of file")
        return out


def _numbered(directory: Path) -> list[Migration]:
    found = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise ValueError(f"migration file name must look like 0001_name.sql: {path.name}")
        found.append(Migration(int(m.group(1)), path.stem, path))
    return found


def discover_migrations(directory: Path = MIGRATIONS_DIR, dialect: str = "sqlite") -> list[Migration]:
    """The migrations of ``dialect`` in order: the shared files, each replaced by its dialect twin."""
    found = _numbered(directory)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 1..n without gaps, found {versions}")
    if dialect == "sqlite":
        return found
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    twins = {m.name: m for m in _numbered(directory / dialect)} if (directory / dialect).is_dir() else {}
    orphans = sorted(set(twins) - {m.name for m in found})
    if orphans:
        raise ValueError(f"{dialect} migrations without a shared migration of the same name: {orphans}")
    return [twins.get(m.name, m) for m in found]
