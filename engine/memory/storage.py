"""Memory writes: storing routed messages, moving a channel to another audience, forgetting.

Free functions over the database and the scope cache (engine.memory.scope_cache), called by the
MemoryEngine facade under the scope's lock. Each writes the database in one transaction first and
then mirrors the change in the cache; when a transaction fails, the scope is dropped from the
cache so the next use reloads what the database holds.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import aiosqlite
import numpy as np

from engine.config import MemorySection
from engine.db import Database
from engine.memory import audience as audience_store
from engine.memory import chattext, lifecycle, router
from engine.memory.audience import PUBLIC
from engine.memory.models import MemoryMessage, RouteResult, aware, from_blob, iso, parse_ts, to_blob
from engine.memory.scope_cache import ChannelState, ScopeCache, ScopeState
from engine.memory.topics import initial_topic

log = logging.getLogger(__name__)

MOVE_SLICE = 16            # messages re-routed between yields to the event loop when a channel moves

Routed = list[tuple[MemoryMessage, np.ndarray]]   # messages with their embeddings, in order


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


async def persist(conn: aiosqlite.Connection, scope: str, state: ScopeState, items: Routed,
                  results: list[RouteResult], born: set[str], touched: set[str], zone: str) -> None:
    """Store routed messages (with their search text, relative dates read in ``zone``) and the worlds
    routing created or moved."""
    await write_worlds(conn, scope, state, items, results, born, touched)
    await conn.executemany(
        "INSERT INTO memory_messages(scope, world_id, channel, message_id, author, author_id, text, ts,"
        " embedding, search_text) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(scope, r.world_id, m.channel, m.message_id, m.author, m.author_id, m.text.strip(),
          iso(aware(m.ts)), to_blob(v), chattext.searchable_text(m.text, aware(m.ts), m.attachments, zone))
         for (m, v), r in zip(items, results)])


async def write_worlds(conn: aiosqlite.Connection, scope: str, state: ScopeState, items: Routed,
                       results: list[RouteResult], born: set[str], touched: set[str]) -> None:
    """Insert the worlds routing gave birth to and save the centroids and counters it moved."""
    first_ts: dict[str, datetime] = {}
    last_ts: dict[str, datetime] = {}
    first_text: dict[str, str] = {}
    for (message, _), result in zip(items, results):
        ts = aware(message.ts)
        first_ts.setdefault(result.world_id, ts)
        first_text.setdefault(result.world_id, message.text)
        last_ts[result.world_id] = max(last_ts.get(result.world_id, ts), ts)
    await conn.executemany(
        "INSERT INTO worlds(id, scope, audience, topic, centroid, access_count, created_at, last_active)"
        " VALUES (?,?,?,?,?,?,?,?)",
        [(wid, scope, state.worlds[wid].audience, initial_topic(first_text[wid]),
          to_blob(state.index_of(wid).vector(wid)), state.worlds[wid].access_count, iso(first_ts[wid]),
          iso(last_ts[wid])) for wid in born])
    await conn.executemany(
        "UPDATE worlds SET centroid=?, access_count=?,"
        " last_active=CASE WHEN last_active > ? THEN last_active ELSE ? END WHERE id=?",
        [(to_blob(state.index_of(wid).vector(wid)), state.worlds[wid].access_count, iso(last_ts[wid]),
          iso(last_ts[wid]), wid) for wid in touched])


# -- audiences ---------------------------------------------------------------------------

async def set_audiences(db: Database, cfg: MemorySection, cache: ScopeCache, scope: str, state: ScopeState,
                        audiences: dict[str, str]) -> tuple[list[str], set[str]]:
    """Record who can read each channel (channel -> audience), moving the channels whose audience
    changed. Returns the channels that changed and the worlds whose contents changed."""
    known = await audience_store.recorded(db, scope, list(audiences))
    changed = [ch for ch, audience in audiences.items() if known.get(ch) != audience]
    worlds: set[str] = set()
    for ch in changed:
        worlds |= await move_channel(db, cfg, cache, scope, state, ch, audiences[ch])
    return changed, worlds


async def settle_audiences(db: Database, cfg: MemorySection, cache: ScopeCache, scope: str, state: ScopeState,
                           items: Routed) -> tuple[dict[str, str], set[str]]:
    """channel -> the audience its messages are routed in, for the channels of ``items``: a
    message's own audience when it carries one (moving the channel first when that is new),
    else the channel's recorded audience. Also returns the worlds that moves changed."""
    wanted: dict[str, str | None] = {}
    for message, _ in items:
        if wanted.get(message.channel) is None:
            wanted[message.channel] = message.audience
    known = await audience_store.recorded(db, scope, list(wanted))
    out: dict[str, str] = {}
    worlds: set[str] = set()
    for channel, audience in wanted.items():
        if audience is not None and known.get(channel) != audience:
            worlds |= await move_channel(db, cfg, cache, scope, state, channel, audience)
        out[channel] = known.get(channel, PUBLIC) if audience is None else audience
    return out, worlds


async def move_channel(db: Database, cfg: MemorySection, cache: ScopeCache, scope: str, state: ScopeState,
                       channel: str, audience: str) -> set[str]:
    """Re-route a channel's stored messages, with their stored embeddings and in their order,
    among the worlds of ``audience``, make their beliefs follow, give the worlds they left
    provisional names, and record the channel's new audience. The caller holds the scope's lock.
    Returns the worlds whose contents changed (to be renamed); empty when no message moved."""
    rows = await db.fetchall(
        "SELECT m.id, m.world_id, m.message_id, m.author, m.text, m.ts, m.embedding FROM memory_messages m "
        "JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND m.channel=? AND w.audience<>? ORDER BY m.id",
        (scope, channel, audience))
    cache.forget_channel(scope, channel)
    if not rows:
        async with db.transaction() as conn:
            await audience_store.record(conn, scope, channel, audience)
        return set()
    fresh = ChannelState()
    items = [(MemoryMessage(scope, channel, r["message_id"], r["author"], r["text"], parse_ts(r["ts"]),
                            audience), from_blob(r["embedding"])) for r in rows]
    results = []
    for i, (message, vec) in enumerate(items):
        results.append(router.route(cfg, state, fresh, message, vec, audience))
        if i % MOVE_SLICE == MOVE_SLICE - 1:
            await asyncio.sleep(0)  # a long channel moves without stalling everything else
    born = {r.world_id for r in results if r.action == "birth"}
    touched = {r.world_id for r in results} - born
    left = {r["world_id"] for r in rows}
    try:
        async with db.transaction() as conn:
            await write_worlds(conn, scope, state, items, results, born, touched)
            await conn.executemany("UPDATE memory_messages SET world_id=? WHERE id=?",
                                   [(res.world_id, r["id"]) for r, res in zip(rows, results)])
            with_beliefs = await audience_store.move_beliefs(
                conn, scope, {r["id"]: res.world_id for r, res in zip(rows, results)})
            recentred = {wid: await lifecycle.recentre(conn, wid) for wid in left}
            for wid in left:  # their names drew on what moved away: provisional ones until renamed
                await audience_store.rename_provisionally(conn, wid)
            await audience_store.record(conn, scope, channel, audience)
    except BaseException:
        cache.forget(scope)  # the database is the truth: reload it on next use
        raise
    for wid, found in recentred.items():
        if found is not None:
            state.set_centroid(wid, *found)
    await remove_dead(db, cache, scope)
    changed = (left | born | touched | with_beliefs) & set(state.worlds)
    await cache.refresh_maturity(scope, sorted(changed))
    log.info("memory: %d messages of %s/%s moved to audience %r", len(rows), scope, channel, audience)
    return changed


# -- forgetting --------------------------------------------------------------------------

async def forget_scope(db: Database, cache: ScopeCache, scope: str) -> dict[str, int]:
    """Delete everything a scope remembers; returns how many messages, beliefs and worlds went."""
    async with db.transaction() as conn:
        counts = {}
        for table in ("memory_messages", "beliefs", "worlds"):
            async with conn.execute(f"SELECT count(*) FROM {table} WHERE scope=?", (scope,)) as cur:
                counts[table] = (await cur.fetchone())[0]
        await conn.execute("DELETE FROM worlds WHERE scope=?", (scope,))
        await conn.execute("DELETE FROM world_merges WHERE scope=?", (scope,))
    cache.forget(scope)
    return {"messages": counts["memory_messages"], "beliefs": counts["beliefs"], "worlds": counts["worlds"]}


async def forget_where(db: Database, cache: ScopeCache, scope: str, where: str, args: tuple) -> dict[str, int]:
    """Forget the scope's messages matching ``where``, the beliefs resting only on them and the
    worlds left empty; the worlds that lost messages are recentred on what they still hold."""
    state = await cache.scope(scope, locked=True)
    async with db.transaction() as conn:
        messages, beliefs, touched = await lifecycle.forget_messages(conn, scope, where, args)
        recentred = {wid: await lifecycle.recentre(conn, wid) for wid in touched}
    for wid, found in recentred.items():
        if found is not None:
            state.set_centroid(wid, *found)
    removed = await remove_dead(db, cache, scope)
    await cache.refresh_maturity(scope, [w for w in touched if w in state.worlds])
    return {"messages": messages, "beliefs": beliefs, "worlds": removed}


async def remove_dead(db: Database, cache: ScopeCache, scope: str | None) -> int:
    """Delete the worlds left with no messages and no beliefs (``scope`` None: in every scope)."""
    dead = await lifecycle.remove_dead(db, scope)
    cache.drop_worlds(dead)
    return len(dead)
