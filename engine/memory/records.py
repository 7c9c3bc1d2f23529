"""Row reads and writes of memory's core tables: ``memory_messages``, ``worlds`` and ``world_merges``.

Every SQL statement on these tables lives here (tests/test_sql_owners.py); every other module,
in engine/memory or outside it, calls these functions. Each takes what it works on explicitly:
``db`` (a Database) or ``conn`` (an open transaction) first, then plain values and rows; none keeps
state, none decides anything (routing, naming, audiences and the scope cache are decided above, in
engine.memory.storage and its neighbours).

It sits at the bottom of engine.memory and imports nothing from it but models, because the modules
that orchestrate memory (storage, lifecycle, topics, audience, chattext, scope_cache, beliefs)
import one another: a module here that imported any of them would close a cycle with whichever
needs its rows.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Sequence

import aiosqlite

from engine.db import Database
from engine.memory.models import MemoryMessage, parse_ts

# -- worlds ------------------------------------------------------------------------------

async def scopes(db: Database) -> list[str]:
    """Every scope that has worlds, in order."""
    return [r["scope"] for r in await db.fetchall("SELECT DISTINCT scope FROM worlds ORDER BY scope")]


async def world_ids(db: Database) -> list[str]:
    """Every world's id, in order."""
    return [r["id"] for r in await db.fetchall("SELECT id FROM worlds ORDER BY id")]


async def set_centroid(conn: aiosqlite.Connection, world_id: str, centroid: bytes) -> None:
    await conn.execute("UPDATE worlds SET centroid=? WHERE id=?", (centroid, world_id))


async def insert_worlds(conn: aiosqlite.Connection, rows: Iterable[tuple]) -> None:
    """New worlds: (id, scope, audience, topic, centroid, access_count, created_at, last_active)."""
    await conn.executemany(
        "INSERT INTO worlds(id, scope, audience, topic, centroid, access_count, created_at, last_active)"
        " VALUES (?,?,?,?,?,?,?,?)", rows)


async def update_worlds(conn: aiosqlite.Connection, rows: Iterable[tuple]) -> None:
    """Worlds routing moved: (centroid, access_count, last_active, last_active, id); last_active
    only moves forward."""
    await conn.executemany(
        "UPDATE worlds SET centroid=?, access_count=?,"
        " last_active=CASE WHEN last_active > ? THEN last_active ELSE ? END WHERE id=?", rows)


# -- messages ----------------------------------------------------------------------------

async def unextracted(db: Database) -> list[tuple[str, str, int]]:
    """(scope, channel, how many) of the routed messages beliefs were not yet extracted from."""
    rows = await db.fetchall("SELECT scope, channel, count(*) AS n FROM memory_messages WHERE extracted=0 "
                             "AND world_id IS NOT NULL GROUP BY scope, channel")
    return [(r["scope"], r["channel"], r["n"]) for r in rows]


async def platform_ids_by_world(db: Database, scope: str) -> dict[str, list[str]]:
    """world id -> platform ids of the messages it holds, in order (for exports)."""
    rows = await db.fetchall(
        "SELECT world_id, message_id FROM memory_messages WHERE scope=? ORDER BY id", (scope,))
    out: dict[str, list[str]] = {}
    for r in rows:   # a pending message (not routed yet) is listed under ''
        out.setdefault(r["world_id"] or "", []).append(r["message_id"])
    return out


# A stored id as a 64-bit number (a Discord snowflake), or 0 where it is none (an imported message's
# id, say): only digit strings that fit are cast, for PostgreSQL refuses to cast anything else where
# SQLite reads 0, and its INTEGER is 32-bit where snowflakes need BIGINT.
NUMERIC_ID = ("CASE WHEN ltrim(m.message_id, '0123456789') = '' AND (length(m.message_id) < 19 OR"
              " (length(m.message_id) = 19 AND m.message_id <= '9223372036854775807'))"
              " THEN CAST(m.message_id AS BIGINT) ELSE 0 END")


async def last_numeric_ids(db: Database, scopes_like: str, off_setting: str) -> list[tuple[str, str, int]]:
    """(scope, channel, largest stored message id that is a 64-bit number, else 0) of every channel
    of the scopes matching the LIKE pattern ``scopes_like`` that memory holds messages of, except
    channels whose setting ``off_setting`` (engine.settings) is 'off'."""
    rows = await db.fetchall(
        f"SELECT m.scope, m.channel, max({NUMERIC_ID}) AS last FROM memory_messages m "
        "WHERE m.scope LIKE ? AND m.message_id <> '' AND NOT EXISTS ("
        " SELECT 1 FROM channel_settings s WHERE s.scope=m.scope AND s.channel=m.channel AND s.key=? "
        " AND s.value='off') GROUP BY m.scope, m.channel ORDER BY m.scope, m.channel", (scopes_like, off_setting))
    return [(r["scope"], r["channel"], r["last"]) for r in rows]


async def first_numeric_ids(db: Database, scopes_like: str) -> dict[str, int]:
    """scope -> smallest stored message id that is a 64-bit number, of every scope matching the LIKE
    pattern ``scopes_like`` that memory holds such a message of."""
    rows = await db.fetchall(
        f"SELECT m.scope, min(NULLIF({NUMERIC_ID}, 0)) AS first FROM memory_messages m "
        "WHERE m.scope LIKE ? AND m.message_id <> '' GROUP BY m.scope", (scopes_like,))
    return {r["scope"]: r["first"] for r in rows if r["first"]}


async def unseen(db: Database, messages: list[MemoryMessage]) -> list[MemoryMessage]:
    """The messages worth storing: not empty, and not already stored (same scope, channel and
    platform id) nor repeated earlier in ``messages``."""
    kept, seen = [], set()
    wanted: dict[tuple[str, str], list[str]] = {}
    for m in messages:
        if m.text.strip() and m.message_id:
            wanted.setdefault((m.scope, m.channel), []).append(m.message_id)
    known: set[tuple[str, str, str]] = set()
    for (scope, channel), ids in wanted.items():
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            # "message_id <> ''" lets SQLite use the partial unique index on platform ids;
            # without it, it scans the channel's rows (84 ms per message at 100k, bench.recall_synth).
            rows = await db.fetchall(
                "SELECT message_id FROM memory_messages WHERE scope=? AND channel=? AND message_id <> '' "
                f"AND message_id IN ({','.join('?' * len(part))})", (scope, channel, *part))
            known |= {(scope, channel, r["message_id"]) for r in rows}
    for m in messages:
        key = (m.scope, m.channel, m.message_id)
        if not m.text.strip() or (m.message_id and (key in known or key in seen)):
            continue
        seen.add(key)
        kept.append(m)
    return kept


async def insert_routed(conn: aiosqlite.Connection, rows: Iterable[tuple]) -> None:
    """Routed messages: (scope, world_id, channel, message_id, author, author_id, text, ts,
    embedding, search_text, search_terms)."""
    await conn.executemany(
        "INSERT INTO memory_messages(scope, world_id, channel, message_id, author, author_id, text, ts,"
        " embedding, search_text, search_terms) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)


async def set_search_texts(conn: aiosqlite.Connection, rows: Iterable[tuple[str, str, int]]) -> None:
    """Messages refitted (engine.memory.chattext.fit_stored): (search_text, search_terms, id)."""
    await conn.executemany("UPDATE memory_messages SET search_text=?, search_terms=? WHERE id=?", rows)


async def channel_outside(db: Database, scope: str, channel: str, audience: str) -> list[Any]:
    """The channel's routed messages that lie in worlds of another audience than ``audience``, in
    order, with their embeddings."""
    return await db.fetchall(
        "SELECT m.id, m.world_id, m.message_id, m.author, m.text, m.ts, m.embedding FROM memory_messages m "
        "JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND m.channel=? AND w.audience<>? ORDER BY m.id",
        (scope, channel, audience))


async def set_worlds_of(conn: aiosqlite.Connection, rows: Iterable[tuple[str, int]]) -> None:
    """Messages moved to other worlds: (world_id, message row id)."""
    await conn.executemany("UPDATE memory_messages SET world_id=? WHERE id=?", rows)


# -- pending messages: stored first, embedded and routed later (engine.memory.pending) ---------

async def last_pending_audience(db: Database, scope: str, channel: str) -> str | None:
    """The audience the channel's newest pending message carries, None when it has none pending."""
    return await db.fetchval("SELECT audience FROM memory_messages WHERE scope=? AND channel=? "
                             "AND world_id IS NULL ORDER BY id DESC LIMIT 1", (scope, channel))


async def reaudience_pending(conn: aiosqlite.Connection, scope: str, channel: str, audience: str) -> None:
    """The channel's pending messages that carry another audience carry ``audience`` now."""
    await conn.execute("UPDATE memory_messages SET audience=? WHERE scope=? AND channel=? AND world_id IS NULL "
                       "AND audience<>?", (audience, scope, channel, audience))


async def insert_pending(conn: aiosqlite.Connection, rows: Iterable[tuple]) -> None:
    """Messages with no world and no vector yet: (scope, channel, message_id, author, author_id, text,
    ts, search_text, search_terms, audience); one already stored is left."""
    await conn.executemany(
        "INSERT INTO memory_messages(scope, world_id, channel, message_id, author, author_id, text, ts,"
        " embedding, search_text, search_terms, audience) VALUES (?,NULL,?,?,?,?,?,?,NULL,?,?,?) "
        "ON CONFLICT DO NOTHING", rows)


async def move_pending(conn: aiosqlite.Connection, scope: str, channel: str, audience: str) -> None:
    """The channel's pending messages are read under its new audience too (and routed in it)."""
    await conn.execute("UPDATE memory_messages SET audience=? WHERE scope=? AND channel=? AND world_id IS NULL",
                       (audience, scope, channel))


# In a statement over rows ``t`` of memory_messages: the id of the oldest pending row of t's scope, or
# one past t's own id when none is pending (the vector index reads only below it: message_index).
OLDEST_PENDING = ("coalesce((SELECT min(p.id) FROM memory_messages p WHERE p.scope=t.scope AND p.world_id IS NULL),"
                  " t.id + 1)")


async def claim_pending(db: Database, owner: str, gone, limit: int) -> list[tuple[int, MemoryMessage]]:
    """Claim up to ``limit`` pending messages for ``owner`` (an owners.id) to embed, oldest first, and
    return those it holds (with their row ids), oldest first. Claims of owners that are gone
    (``gone(owner_id)``, engine.owners) are taken over first. A scope where another live owner
    holds claims is left to it, so each scope's messages are routed in order by one process; the
    compare-and-set on ``claimed_by`` keeps two processes from ever claiming one row."""
    holders = await db.fetchall("SELECT DISTINCT claimed_by FROM memory_messages WHERE world_id IS NULL "
                                "AND claimed_by IS NOT NULL AND claimed_by<>?", (owner,))
    for r in holders:
        if await gone(r["claimed_by"]):
            await release_claims(db, r["claimed_by"])
    await db.execute(
        "UPDATE memory_messages SET claimed_by=? WHERE world_id IS NULL AND claimed_by IS NULL AND id IN ("
        " SELECT p.id FROM memory_messages p WHERE p.world_id IS NULL AND p.claimed_by IS NULL AND NOT EXISTS ("
        "  SELECT 1 FROM memory_messages o WHERE o.scope=p.scope AND o.world_id IS NULL AND o.claimed_by<>?)"
        " ORDER BY p.id LIMIT ?)", (owner, owner, limit))
    rows = await db.fetchall(
        "SELECT id, scope, channel, message_id, author, author_id, text, ts, audience FROM memory_messages "
        "WHERE world_id IS NULL AND claimed_by=? ORDER BY id LIMIT ?", (owner, limit))
    return [(r["id"], MemoryMessage(r["scope"], r["channel"], r["message_id"], r["author"], r["text"],
                                    parse_ts(r["ts"]), r["author_id"], r["audience"])) for r in rows]


async def still_claimed(db: Database, owner: str, scope: str, ids: list[int]) -> dict[int, str]:
    """row id -> audience of those of ``ids`` still pending and claimed by ``owner`` (one forgotten
    or moved to another audience meanwhile is dropped or read anew). Under the scope's lock."""
    if not ids:
        return {}
    rows = await db.fetchall(
        f"SELECT id, audience FROM memory_messages WHERE scope=? AND id IN ({','.join('?' * len(ids))}) "
        "AND world_id IS NULL AND claimed_by=?", (scope, *ids, owner))
    return {r["id"]: r["audience"] for r in rows}


async def place_pending(conn: aiosqlite.Connection, rows: Iterable[tuple]) -> None:
    """Pending messages routed: (world_id, embedding, row id); they are read as their worlds' now."""
    await conn.executemany(
        "UPDATE memory_messages SET world_id=?, embedding=?, audience=NULL, claimed_by=NULL WHERE id=?", rows)


async def release_claims(db: Database, owner: str) -> None:
    """Let other processes embed what ``owner`` claimed and did not finish (at a clean stop)."""
    await db.execute("UPDATE memory_messages SET claimed_by=NULL WHERE world_id IS NULL AND claimed_by=?", (owner,))


async def drop_pending(db: Database, row_id: int) -> None:
    """Remove a pending message that cannot be embedded or routed, even alone."""
    await db.execute("DELETE FROM memory_messages WHERE id=? AND world_id IS NULL", (row_id,))


async def pending_count(db: Database) -> int:
    """How many stored messages, of every scope, wait for their vector and world."""
    return await db.fetchval("SELECT count(*) FROM memory_messages WHERE world_id IS NULL", default=0)


async def pending_seen(db: Database, scope: str, sees: str, seen: Sequence[str]) -> int:
    """How many of the scope's stored messages that meet ``sees`` (over ``m.audience``, a pending
    row's own) wait for their vector and world."""
    return await db.fetchval(f"SELECT count(*) FROM memory_messages m WHERE m.scope=? AND m.world_id IS NULL "
                             f"AND {sees}", (scope, *seen), 0)


async def newest_row(db: Database, scope: str) -> int:
    """The highest row id of the scope's stored messages (0 when none)."""
    return await db.fetchval("SELECT max(id) FROM memory_messages WHERE scope=?", (scope,), 0) or 0


async def pending_up_to(db: Database, scope: str, up_to: int) -> int:
    """How many of the scope's stored messages up to row ``up_to`` wait for their vector and world."""
    return await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=? AND id <= ? AND world_id IS NULL",
                             (scope, up_to), 0)


# -- a whole scope -----------------------------------------------------------------------

async def delete_scope(conn: Any, scope: str) -> tuple[dict[str, frozenset[int]], int]:
    """Delete a scope's worlds and merge history; returns the ids of the scope's messages and beliefs
    (by table) as they stood before, and how many worlds went."""
    ids = {}
    for table in ("memory_messages", "beliefs"):
        async with conn.execute(f"SELECT id FROM {table} WHERE scope=?", (scope,)) as cur:
            ids[table] = frozenset(r[0] for r in await cur.fetchall())
    async with conn.execute("SELECT count(*) FROM worlds WHERE scope=?", (scope,)) as cur:
        worlds = (await cur.fetchone())[0]
    await conn.execute("DELETE FROM worlds WHERE scope=?", (scope,))
    await conn.execute("DELETE FROM world_merges WHERE scope=?", (scope,))
    return ids, worlds


# -- reads of other memory modules ---------------------------------------------------------

async def latest_texts(db: Database, scope: str, channel: str, n: int) -> list[Any]:
    """The texts of the channel's ``n`` newest messages, newest first (engine.memory.languages)."""
    return await db.fetchall("SELECT text FROM memory_messages WHERE scope=? AND channel=? ORDER BY id DESC LIMIT ?",
                             (scope, channel, n))


async def worlds_with_evidence(db: Database, scope: str, in_use: str) -> list[Any]:
    """The scope's worlds that meet ``in_use`` (a condition on ``w.``: scope_cache.in_use), oldest
    first, each with how many messages it holds (``evidence``)."""
    return await db.fetchall(
        "SELECT w.id, w.audience, w.centroid, w.access_count, w.topic_size, "
        "(SELECT count(*) FROM memory_messages m WHERE m.world_id = w.id) AS evidence "
        f"FROM worlds w WHERE w.scope=? AND {in_use} ORDER BY w.created_at, w.id", (scope,))


async def latest_routed(db: Database, scope: str, channel: str, n: int) -> list[Any]:
    """The channel's ``n`` newest routed messages (world, time, text, embedding), newest first."""
    return await db.fetchall(
        "SELECT world_id, ts, text, embedding FROM memory_messages WHERE scope=? AND channel=? "
        "AND world_id IS NOT NULL ORDER BY id DESC LIMIT ?", (scope, channel, n))


async def nearest_in_worlds(db: Database, table: str, vec: bytes, scope: str, sees: str, seen: Sequence[str],
                            n: int) -> list[Any]:
    """The ``n`` rows of ``table`` (memory_messages or beliefs) nearest to ``vec`` by pgvector's cosine
    distance ``d``, among worlds whose audience meets ``sees`` (a condition on ``w.audience`` with
    its values ``seen``: audience.Viewer.where)."""
    return await db.fetchall(
        f"SELECT t.id, t.embedding <=> ? AS d FROM {table} t JOIN worlds w ON w.id = t.world_id "
        f"WHERE t.scope=? AND {sees} ORDER BY d, t.id LIMIT ?", (vec, scope, *seen, n))


async def vectors_after(db: Database, table: str, scope: str, after: int) -> list[Any]:
    """The rows of ``table`` (memory_messages or beliefs) of ``scope`` past id ``after``, in order,
    with their embedding and their world's audience; of memory_messages only those below the
    scope's oldest pending message (``OLDEST_PENDING``)."""
    below = f"AND t.id < {OLDEST_PENDING} " if table == "memory_messages" else ""
    return await db.fetchall(
        f"SELECT t.id, t.embedding, w.audience FROM {table} t CROSS JOIN worlds w WHERE w.id = t.world_id "
        f"AND t.scope=? AND t.id>? {below}ORDER BY t.id", (scope, after))  # a range of (scope, id)


async def messages_per_world_since(db: Database, scope: str, since: str) -> list[Any]:
    """(world_id, n) of the scope's messages stored at or after ``since`` (ISO), most first."""
    return await db.fetchall(
        "SELECT world_id, count(*) AS n FROM memory_messages WHERE scope=? AND ts>=? GROUP BY world_id "
        "ORDER BY n DESC, world_id", (scope, since))


async def merges_since(db: Database, scope: str, sees: str, seen: Sequence[str], since: str) -> list[Any]:
    """The scope's merges at or after ``since`` (ISO) whose audience meets ``sees`` (with its values
    ``seen``: audience.Viewer.where), in order."""
    return await db.fetchall(
        "SELECT kept_id, absorbed_id, absorbed_topic, similarity FROM world_merges "
        f"WHERE scope=? AND {sees} AND merged_at>=? ORDER BY merged_at, id", (scope, *seen, since))


async def last_said(db: Database, scope: str, channel: str, author_id: str) -> tuple[int, datetime] | None:
    """(row id, time) of the newest message ``author_id`` stored in the channel; None when none."""
    row = await db.fetchone("SELECT id, ts FROM memory_messages WHERE scope=? AND channel=? AND author_id=? "
                            "ORDER BY id DESC LIMIT 1", (scope, channel, author_id))
    return (row["id"], parse_ts(row["ts"])) if row else None


def _said_after(scope: str, channel: str, after: int | None, since: str, sees: str,
                seen: Sequence[str]) -> tuple[str, tuple]:
    """The FROM and WHERE of a channel's routed messages after row ``after`` (None: after time
    ``since``, ISO) in worlds whose audience meets ``sees`` (on ``w.audience``), with their values."""
    later, mark = ("m.id > ?", after) if after is not None else ("m.ts > ?", since)
    period = (f"FROM memory_messages m JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND m.channel=? "
              f"AND {later} AND {sees}")
    return period, (scope, channel, mark, *seen)


async def said_after(db: Database, scope: str, channel: str, after: int | None, since: str, sees: str,
                     seen: Sequence[str], limit: int) -> list[Any]:
    """The ``limit`` newest of those messages (``_said_after``), newest first, with their embeddings."""
    period, args = _said_after(scope, channel, after, since, sees, seen)
    return await db.fetchall("SELECT m.id, m.world_id, m.channel, m.message_id, m.author, m.text, m.ts, m.embedding "
                             f"{period} ORDER BY m.id DESC LIMIT ?", (*args, limit))


async def count_said_after(db: Database, scope: str, channel: str, after: int | None, since: str, sees: str,
                           seen: Sequence[str]) -> int:
    """How many messages ``said_after`` chooses from."""
    period, args = _said_after(scope, channel, after, since, sees, seen)
    return await db.fetchval(f"SELECT count(*) {period}", args)


async def unread_batch(db: Database, scope: str, channel: str, limit: int) -> list[Any]:
    """The channel's oldest ``limit`` routed messages not yet read for beliefs, in order."""
    return await db.fetchall(
        "SELECT id, author, text, ts FROM memory_messages WHERE scope=? AND channel=? AND extracted=0 "
        "AND world_id IS NOT NULL ORDER BY id LIMIT ?", (scope, channel, limit))


async def unread_count(db: Database, scope: str | None = None, channel: str | None = None) -> int:
    """How many routed messages of the channel (of every channel: None) wait to be read for beliefs
    (a message still waiting for its world, engine.memory.pending, is read once it has one)."""
    if scope is None:
        return await db.fetchval("SELECT count(*) FROM memory_messages WHERE extracted=0 AND world_id IS NOT NULL",
                                 default=0)
    return await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=? AND channel=? AND extracted=0 "
                             "AND world_id IS NOT NULL", (scope, channel))


async def unread_channels(db: Database) -> list[tuple[str, str]]:
    """(scope, channel) of every channel with messages not yet read for beliefs."""
    return [(r["scope"], r["channel"]) for r in await db.fetchall(
        "SELECT DISTINCT scope, channel FROM memory_messages WHERE extracted=0 AND world_id IS NOT NULL")]


async def mark_read(conn: aiosqlite.Connection, ids: list[int]) -> None:
    """The messages ``ids`` were read for beliefs."""
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        await conn.execute(f"UPDATE memory_messages SET extracted=1 WHERE id IN ({','.join('?' * len(part))})", part)


async def by_ids(db: Database, scope: str, ids: Iterable[int], columns: str) -> list[Any]:
    """``columns`` of the scope's stored messages among ``ids`` (those memory still holds)."""
    ordered = sorted(ids)
    rows: list[Any] = []
    for i in range(0, len(ordered), 500):
        part = ordered[i:i + 500]
        rows += await db.fetchall(f"SELECT {columns} FROM memory_messages WHERE scope=? AND id IN "
                                  f"({','.join('?' * len(part))})", (scope, *part))
    return rows


async def latest_seen(db: Database, scope: str, where: str, value: str | None, sees: str, seen: Sequence[str],
                      since: str | None, limit: int) -> list[Any]:
    """The scope's ``limit`` newest routed messages meeting ``where`` (a condition on ``m.`` with its
    one ``value``) in worlds whose audience meets ``sees`` (with its values ``seen``), after ``since``
    (ISO; None: ever), newest first, with their authors, channels and times."""
    after, after_params = ("AND m.ts > ?", [since]) if since is not None else ("", [])
    return await db.fetchall(
        "SELECT m.id, m.author_id, m.author, m.channel, m.text, m.ts FROM memory_messages m "
        f"JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND {where} AND {sees} {after} "
        "ORDER BY m.id DESC LIMIT ?", (scope, value, *seen, *after_params, limit))


async def by_author(db: Database, scope: str, author_id: str, sees: str, seen: Sequence[str]) -> list[Any]:
    """(id, world_id, ts) of the scope's messages by ``author_id`` that meet ``sees`` (a condition on
    ``w.`` and ``m.``, a pending message's world being NULL, with its values ``seen``), in order."""
    return await db.fetchall(
        "SELECT m.id, m.world_id, m.ts FROM memory_messages m LEFT JOIN worlds w ON w.id = m.world_id "
        f"WHERE m.scope=? AND m.author_id=? AND {sees} ORDER BY m.id", (scope, author_id, *seen))


async def count_by_author(db: Database, scope: str, author_id: str) -> int:
    """How many messages of the scope ``author_id`` stored, wherever they lie."""
    return await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=? AND author_id=?",
                             (scope, author_id), 0)


async def with_topics(db: Database, scope: str) -> list[Any]:
    """Every message of the scope, in order, with its world id and topic ('' for a pending message)."""
    return await db.fetchall(
        "SELECT m.id, m.message_id, m.channel, m.author, m.author_id, m.text, m.ts,"
        " coalesce(m.world_id, '') AS world_id, coalesce(w.topic, '') AS topic"
        " FROM memory_messages m LEFT JOIN worlds w ON w.id = m.world_id "
        "WHERE m.scope=? ORDER BY m.id", (scope,))


async def seen_or_own(db: Database, scope: str, sees: str, seen: Sequence[str], asker_id: str, *,
                      row_id: int | None = None, platform_id: str | None = None) -> list[Any]:
    """The scope's messages with row id ``row_id``, else platform id ``platform_id`` (in order), that
    meet ``sees`` (with its values ``seen``) or are ``asker_id``'s own; [] when neither id is given."""
    mine = "OR (m.author_id=? AND m.author_id <> '')"
    base = ("SELECT m.id, m.channel, m.message_id, m.author, m.author_id, m.text, m.ts FROM memory_messages m "
            f"LEFT JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND ({sees} {mine})")
    if row_id is not None:
        return await db.fetchall(f"{base} AND m.id=?", (scope, *seen, asker_id, row_id))
    if platform_id:
        return await db.fetchall(f"{base} AND m.message_id=? ORDER BY m.id", (scope, *seen, asker_id, platform_id))
    return []


# The rows recall loads (engine.memory.retrieval). A pending message (stored, not yet routed:
# engine.memory.pending) has no world: its world id and topic read '' and it is read under its own
# audience (audience.message_audience). LEFT JOIN keeps SQLite on the message rows first (by id, or by
# channel); "(m.scope || '')" stops it from walking the whole scope's index instead. Both are plain SQL
# to PostgreSQL, whose planner takes neither as a hint.
_RECALLED = ("SELECT m.id, coalesce(m.world_id, '') AS world_id, m.channel, m.message_id, m.author, m.text, "
             "m.ts, m.embedding, coalesce(w.topic, '') AS topic "
             "FROM memory_messages m LEFT JOIN worlds w ON w.id = m.world_id WHERE 1=1")


async def recalled(db: Database, scope: str, ids: Sequence[int], sees: str, seen: Sequence[str]) -> list[Any]:
    """The scope's messages among ``ids`` that meet ``sees`` (a condition on the message's audience
    with its values ``seen``: audience.Viewer.where), each with its embedding and world topic."""
    return await db.fetchall(f"{_RECALLED} AND m.id IN ({','.join('?' * len(ids))}) AND (m.scope || '')=? "
                             f"AND {sees}", (*ids, scope, *seen))


async def newest_recalled(db: Database, scope: str, world_id: str, sees: str, seen: Sequence[str],
                          n: int) -> list[Any]:
    """The world's ``n`` newest messages that meet ``sees`` (as ``recalled``), newest first."""
    return await db.fetchall(f"{_RECALLED} AND m.world_id=? AND m.scope=? AND {sees} ORDER BY m.id DESC "
                             "LIMIT ?", (world_id, scope, *seen, n))


async def adjacent_ids(db: Database, scope: str,
                       turns: Sequence[tuple[str, int]]) -> list[tuple[int | None, int | None]]:
    """For each (channel, row id) of ``turns``, in order: the ids of the channel's next message after
    it and of the one before it (None where there is none); one statement for all."""
    parts: list[str] = []
    params: list[Any] = []
    for n, (channel, row_id) in enumerate(turns):
        for op, order in ((">", "ASC"), ("<", "DESC")):
            parts.append("SELECT CAST(? AS INTEGER) AS pos, (SELECT id FROM memory_messages"
                         f" WHERE scope=? AND channel=? AND id {op} ? ORDER BY id {order} LIMIT 1) AS id")
            params += [n, scope, channel, row_id]
    found = await db.fetchall(" UNION ALL ".join(parts), params)
    ids = [r["id"] for r in sorted(found, key=lambda r: r["pos"])]
    return list(zip(ids[::2], ids[1::2]))


async def worlds_seen(db: Database, scope: str, sees: str, seen: Sequence[str], in_recall: str,
                      in_use: str | None = None, world_ids: Sequence[str] | None = None) -> list[Any]:
    """The scope's worlds whose audience meets ``sees`` (a condition on ``w.audience`` with its values
    ``seen``), only those meeting ``in_use`` (a condition on ``w.``: scope_cache.in_use) when given,
    only ``world_ids`` when given; most recently active first, each with how many messages it holds
    (``evidence``) and how many beliefs meet ``in_recall`` (a condition on ``b.``: beliefs.in_recall)
    and their average confidence (``beliefs``, ``conf``)."""
    where, params = f"w.scope=? AND {sees}", [scope, *seen]
    if in_use is not None:
        where += f" AND {in_use}"
    if world_ids is not None:
        where += f" AND w.id IN ({','.join('?' * len(world_ids))})"
        params += world_ids
    return await db.fetchall(
        "SELECT w.id, w.scope, w.audience, w.topic, w.access_count, w.created_at, w.last_active, w.archived_at, "
        "(SELECT count(*) FROM memory_messages m WHERE m.world_id=w.id) AS evidence, "
        f"(SELECT count(*) FROM beliefs b WHERE b.world_id=w.id AND {in_recall}) AS beliefs, "
        f"(SELECT avg(confidence) FROM beliefs b WHERE b.world_id=w.id AND {in_recall}) AS conf "
        f"FROM worlds w WHERE {where} ORDER BY w.last_active DESC, w.id", params)


async def world_named(db: Database, scope: str, wanted: str, sees: str, seen: Sequence[str], in_use: str) -> str | None:
    """The id of the scope's world meeting ``sees`` (a condition on ``audience`` with its values
    ``seen``) and ``in_use`` (scope_cache.in_use) whose id is ``wanted`` (lower-cased), else whose id
    starts with it (three characters or more), else whose topic is it, else whose topic holds it; the
    most accessed first. None when none is."""
    like = wanted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    for sql, param in (("id=?", wanted),
                       ("id LIKE ? ESCAPE '\\'", like + "%" if len(wanted) >= 3 else None),
                       ("lower(topic)=?", wanted),
                       ("lower(topic) LIKE ? ESCAPE '\\'", f"%{like}%")):
        if param is None:
            continue
        found = await db.fetchval(
            f"SELECT id FROM worlds WHERE scope=? AND {sees} AND {in_use} AND {sql} "
            "ORDER BY access_count DESC, id LIMIT 1",
            (scope, *seen, param))
        if found:
            return found
    return None


async def name_worlds(conn: aiosqlite.Connection, rows: Iterable[tuple]) -> None:
    """Worlds named: (topic, topic_size, id, scope)."""
    await conn.executemany("UPDATE worlds SET topic=?, topic_size=? WHERE id=? AND scope=?", rows)


async def newest_texts_by_world(db: Database, world_ids: list[str], n: int) -> dict[str, list[str]]:
    """world id -> the texts of its ``n`` newest messages, newest first."""
    docs: dict[str, list[str]] = {}
    for i in range(0, len(world_ids), 500):
        part = world_ids[i:i + 500]
        rows = await db.fetchall(
            "SELECT world_id, text FROM (SELECT world_id, text, row_number() OVER "
            "(PARTITION BY world_id ORDER BY id DESC) AS rn FROM memory_messages "
            f"WHERE world_id IN ({','.join('?' * len(part))})) t WHERE rn<=? ORDER BY world_id, rn",
            (*part, n))
        for r in rows:
            docs.setdefault(r["world_id"], []).append(r["text"])
    return docs


async def oldest_text(conn: aiosqlite.Connection, world_id: str) -> str | None:
    """The text of the world's oldest message; None when it holds none."""
    async with conn.execute("SELECT text FROM memory_messages WHERE world_id=? ORDER BY id LIMIT 1",
                            (world_id,)) as cur:
        row = await cur.fetchone()
    return row["text"] if row is not None else None


async def set_topic(conn: aiosqlite.Connection, world_id: str, topic: str) -> None:
    """The world is named ``topic`` for now (its topic size back to 0, so naming runs again)."""
    await conn.execute("UPDATE worlds SET topic=?, topic_size=0 WHERE id=?", (topic, world_id))


async def routed_worlds(conn: aiosqlite.Connection, scope: str, ids: Sequence[int]) -> dict[int, str]:
    """message id -> world id of those of ``ids`` (sorted) routed to a world in the scope."""
    where: dict[int, str] = {}
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        async with conn.execute(
                f"SELECT id, world_id FROM memory_messages WHERE scope=? AND world_id IS NOT NULL"
                f" AND id IN ({','.join('?' * len(part))})",
                (scope, *part)) as cur:
            where.update({r["id"]: r["world_id"] for r in await cur.fetchall()})
    return where


# -- a world's life (engine.memory.lifecycle) ------------------------------------------------

async def world_dates(conn: aiosqlite.Connection, world_id: str) -> Any:
    """The world's topic, created_at and last_active."""
    async with conn.execute("SELECT topic, created_at, last_active FROM worlds WHERE id=?", (world_id,)) as cur:
        return await cur.fetchone()


async def move_world_messages(conn: aiosqlite.Connection, from_id: str, to_id: str) -> None:
    """Every message of world ``from_id`` lies in world ``to_id`` now."""
    await conn.execute("UPDATE memory_messages SET world_id=? WHERE world_id=?", (to_id, from_id))


async def absorb(conn: aiosqlite.Connection, world_id: str, centroid: bytes, access_count: int, created_at: str,
                 last_active: str) -> None:
    """The world takes ``centroid`` and ``access_count``, and the earlier ``created_at`` and later
    ``last_active`` of its own and those given (of a world it absorbed)."""
    await conn.execute(
        "UPDATE worlds SET centroid=?, access_count=?,"
        " created_at=CASE WHEN created_at < ? THEN created_at ELSE ? END,"
        " last_active=CASE WHEN last_active > ? THEN last_active ELSE ? END WHERE id=?",
        (centroid, access_count, created_at, created_at, last_active, last_active, world_id))


async def insert_merge(conn: aiosqlite.Connection, scope: str, audience: str, kept_id: str, absorbed_id: str,
                       absorbed_topic: str, similarity: float, merged_at: str) -> None:
    """A merge in the scope's history."""
    await conn.execute(
        "INSERT INTO world_merges(scope, audience, kept_id, absorbed_id, absorbed_topic, similarity, merged_at)"
        " VALUES (?,?,?,?,?,?,?)", (scope, audience, kept_id, absorbed_id, absorbed_topic, similarity, merged_at))


async def delete_world(conn: aiosqlite.Connection, world_id: str) -> None:
    await conn.execute("DELETE FROM worlds WHERE id=?", (world_id,))


async def clear_merge_topics(conn: aiosqlite.Connection, scope: str) -> None:
    """The scope's merges keep no name of the worlds they absorbed."""
    await conn.execute("UPDATE world_merges SET absorbed_topic='' WHERE scope=?", (scope,))


async def delete_empty_worlds(db: Database, scope: str | None) -> list[tuple[str, str]]:
    """Delete the worlds (of ``scope``; None: of every scope) that hold no message and no belief;
    returns their (scope, id)."""
    where = "AND scope=?" if scope else ""
    async with db.transaction() as conn:
        async with conn.execute(
                "DELETE FROM worlds WHERE NOT EXISTS (SELECT 1 FROM memory_messages m WHERE m.world_id=worlds.id) "
                f"AND NOT EXISTS (SELECT 1 FROM beliefs b WHERE b.world_id=worlds.id) {where} RETURNING scope, id",
                (scope,) if scope else ()) as cur:
            return [(r["scope"], r["id"]) for r in await cur.fetchall()]


async def archive_worlds(db: Database, scope: str, now: str, in_use: str, cutoff: str,
                         in_recall: str) -> list[tuple[str, str]]:
    """Archive at ``now`` (ISO) the scope's worlds that meet ``in_use`` (a condition on the worlds:
    scope_cache.in_use), were last active before ``cutoff`` (ISO), and hold a retired belief but
    none that meets ``in_recall`` (a condition on ``b.``: beliefs.in_recall); returns their (scope, id)."""
    async with db.transaction() as conn:
        async with conn.execute(
                f"UPDATE worlds SET archived_at=? WHERE scope=? AND {in_use} AND last_active < ? "
                "AND EXISTS (SELECT 1 FROM beliefs b WHERE b.world_id=worlds.id AND b.retired_at IS NOT NULL) "
                f"AND NOT EXISTS (SELECT 1 FROM beliefs b WHERE b.world_id=worlds.id AND {in_recall}) "
                "RETURNING scope, id", (now, scope, cutoff)) as cur:
            return [(r["scope"], r["id"]) for r in await cur.fetchall()]


async def matching(conn: aiosqlite.Connection, scope: str, where: str, args: tuple) -> list[Any]:
    """(id, world_id) of the scope's messages meeting ``where`` (with its values ``args``)."""
    async with conn.execute(f"SELECT id, world_id FROM memory_messages WHERE scope=? AND {where}",
                            (scope, *args)) as cur:
        return list(await cur.fetchall())


async def delete_matching(conn: aiosqlite.Connection, scope: str, where: str, args: tuple) -> None:
    """Delete the scope's messages meeting ``where`` (with its values ``args``)."""
    await conn.execute(f"DELETE FROM memory_messages WHERE scope=? AND {where}", (scope, *args))


async def embeddings_of(conn: aiosqlite.Connection, world_id: str) -> list[Any]:
    """The embeddings of the world's messages."""
    async with conn.execute("SELECT embedding FROM memory_messages WHERE world_id=?", (world_id,)) as cur:
        return list(await cur.fetchall())


async def set_centroid_count(conn: aiosqlite.Connection, world_id: str, centroid: bytes, count: int) -> None:
    await conn.execute("UPDATE worlds SET centroid=?, access_count=? WHERE id=?", (centroid, count, world_id))
