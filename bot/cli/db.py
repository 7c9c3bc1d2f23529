"""`db upgrade`, `db current` (on the configured database, SQLite or PostgreSQL) and
`db migrate-to postgresql://...` (copy the configured SQLite database into an empty PostgreSQL
one: engine/db/copy.py)."""
from __future__ import annotations

import sys
from urllib.parse import urlsplit, urlunsplit

from engine.db import is_postgres_url, open_database
from engine.db.copy import BATCH_ROWS, CopyRefused, copy_database


def register(sub) -> None:
    p = sub.add_parser("db", help="database schema: upgrade or show the current version")
    dbsub = p.add_subparsers(dest="db_command", metavar="<action>", required=True)
    up = dbsub.add_parser("upgrade", help="apply pending migrations")
    up.set_defaults(func=upgrade)
    cur = dbsub.add_parser("current", help="print the schema version of the database")
    cur.set_defaults(func=current)
    move = dbsub.add_parser(
        "migrate-to", help="copy the configured SQLite database into an empty PostgreSQL database",
        description="Copy every table of the configured SQLite database into an empty PostgreSQL database "
                    "(pgvector available), verify the row counts and print the config.toml change that "
                    "switches the bot over. Stop the bot first; the SQLite file is only read.")
    move.add_argument("url", metavar="postgresql://user@host:5432/dbname",
                      help="the target database (its password in PGPASSWORD)")
    move.add_argument("--batch", type=int, default=BATCH_ROWS, metavar="ROWS",
                      help=f"rows per insert batch (default {BATCH_ROWS})")
    move.set_defaults(func=migrate_to)


async def upgrade(args, config) -> int:
    db = await open_database(config.db_url, upgrade=False, settings=config.database)
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
    db = await open_database(config.db_url, upgrade=False, settings=config.database)
    try:
        version = await db.current_version()
        latest = db.migrations()[-1].version
    finally:
        await db.close()
    note = "" if version == latest else f" (this bot knows up to {latest}; run `python -m bot db upgrade`)"
    print(f"{version}{note}")
    return 0


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", "@", 1)))


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


async def migrate_to(args, config) -> int:
    if not is_postgres_url(args.url):
        return _refuse(f"{args.url} is not a PostgreSQL URL; give postgresql://user@host:5432/dbname")
    if args.batch < 1:
        return _refuse("--batch must be at least 1")
    if config.uses_postgres:
        return _refuse("database.url already names PostgreSQL; migrate-to copies the SQLite database "
                       "the configuration names (database.path or a sqlite:/// url)")
    if not config.db_path.is_file():
        return _refuse(f"there is no SQLite database at {config.db_path} to move")

    def progress(table: str, done: int, total: int) -> None:
        if done or not total:   # a table's start says nothing its first batch will not
            print(f"  {table}: {done}/{total} rows", flush=True)

    # a copy's statements (its batches, the ANALYZE after it) are bounded by the data, not runaways
    settings = config.database.model_copy(update={"statement_timeout_s": 0.0})
    source = await open_database(config.db_url, upgrade=False, settings=settings)
    try:
        target = await open_database(args.url, upgrade=False, settings=settings)
        try:
            print(f"copying {source.label} into {target.label}", flush=True)
            counts = await copy_database(source, target, args.batch, progress)
            version = await target.current_version()
        finally:
            await target.close()
    except CopyRefused as err:
        return _refuse(str(err))
    finally:
        await source.close()
    print(f"copied {len(counts)} tables, {sum(counts.values())} rows; row counts verified; schema version "
          f"{version}. The SQLite file is unchanged.")
    print("Next, point the bot at PostgreSQL in config.toml:\n\n[database]\n"
          f'url = "{_without_password(args.url)}"\n')
    print("The password, if any, goes in the environment variable PGPASSWORD; then start the bot.")
    return 0
