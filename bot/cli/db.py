"""`db upgrade` and `db current`."""
from __future__ import annotations

from engine.db import open_database


def register(sub) -> None:
    p = sub.add_parser("db", help="database schema: upgrade or show the current version")
    dbsub = p.add_subparsers(dest="db_command", metavar="<action>", required=True)
    up = dbsub.add_parser("upgrade", help="apply pending migrations")
    up.set_defaults(func=upgrade)
    cur = dbsub.add_parser("current", help="print the schema version of the database")
    cur.set_defaults(func=current)


async def upgrade(args, config) -> int:
    db = await open_database(config.db_url, upgrade=False)
    try:
        applied = await db.upgrade()
        version = await db.current_version()
    finally:
        await db.close()
    if applied:
        print(f"applied migrations {', '.join(map(str, applied))}; schema version {version}")
    else:
        print(f"already up to date; schema version {version}")
    return 0


async def current(args, config) -> int:
    db = await open_database(config.db_url, upgrade=False)
    try:
        version = await db.current_version()
        latest = db.migrations()[-1].version
    finally:
        await db.close()
    note = "" if version == latest else f" (this bot knows up to {latest}; run `python -m bot db upgrade`)"
    print(f"{version}{note}")
    return 0
