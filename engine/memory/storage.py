"""Memory writes: storing routed messages, moving a channel to another audience, forgetting.

Free functions over the database and the scope cache (engine.memory.scope_cache), called by the
MemoryEngine facade under the scope's lock. Each writes the database in one transaction first and
then mirrors the change in the cache; when a transaction fails, the scope is dropped from the
cache so the next use reloads what the database holds.

The statements on memory's core tables (``memory_messages``, ``worlds``, ``world_merges``) live
in engine.memory.rows, below this module and its neighbours; this module decides what is written
and in which transaction, and calls rows for each statement.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Sequence

import aiosqlite
import numpy as np

from engine.config import MemorySection
from engine.db import Database
from engine.memory import audience as audience_store, chattext, lifecycle, records, router
from engine.memory.audience import PUBLIC
from engine.memory.models import Forgotten, MemoryMessage, RouteResult, aware, from_blob, iso, parse_ts, to_blob
from engine.memory.scope_cache import ChannelState, ScopeCache, ScopeState
from engine.memory.topics import initial_topic

log = logging.getLogger(__name__)

MOVE_SLICE = 16            # messages re-routed between yields to the event loop when a channel moves

Routed = list[tuple[MemoryMessage, np.ndarray]]   # messages with their embeddings, in order


async def recentre_all(db: Database, batch: int) -> int:
    """Every world's centroid again from its (refitted) messages, ``batch`` worlds a transaction;
    its counters stay (engine.vector_model ``reembed``). The number of worlds."""
    ids = await records.world_ids(db)
    for start in range(0, len(ids), batch):
        async with db.transaction() as conn:
            for wid in ids[start:start + batch]:
                found = await lifecycle.centroid_of(conn, wid)
                if found is not None:
                    await records.set_centroid(conn, wid, to_blob(np.asarray(found[0], dtype=np.float32)))
    return len(ids)


# -- pending messages: stored first, embedded and routed later (engine.memory.pending) ---------

async def pending_audiences(db: Database, scope: str, messages: list[MemoryMessage]) -> dict[str, str]:
    """channel -> the audience the pending messages of ``messages``' channels are read under: the
    last audience one of them carries, else that of the channel's pending rows (which may carry a
    newer one than recorded), else the channel's recorded audience, else the public one. All of a
    channel's pending rows share it, as all its routed rows share one audience."""
    carried: dict[str, str | None] = {}
    for m in messages:
        if m.audience is not None or m.channel not in carried:
            carried[m.channel] = m.audience
    out: dict[str, str] = {ch: a for ch, a in carried.items() if a is not None}
    unknown = [ch for ch in carried if ch not in out]
    for ch in unknown:
        found = await records.last_pending_audience(db, scope, ch)
        if found is not None:
            out[ch] = found
    known = await audience_store.recorded(db, scope, [ch for ch in unknown if ch not in out])
    for ch in unknown:
        out.setdefault(ch, known.get(ch, PUBLIC))
    return out


async def store_pending(conn: aiosqlite.Connection, scope: str, messages: list[MemoryMessage],
                        audiences: dict[str, str], fitted: dict[int, chattext.Searchable]) -> None:
    """Store messages with no world and no vector yet, searchable by their words (``fitted`` by
    ``id()`` of the message) under their channel's audience (``audiences``, which the channel's
    earlier pending rows take too). A message already stored (another process was first) is left."""
    for channel, audience in audiences.items():
        await records.reaudience_pending(conn, scope, channel, audience)
    await records.insert_pending(
        conn, [(scope, m.channel, m.message_id, m.author, m.author_id, m.text.strip(), iso(aware(m.ts)),
          fitted[id(m)].text, fitted[id(m)].terms, audiences[m.channel]) for m in messages])


async def fill_pending(conn: aiosqlite.Connection, scope: str, state: ScopeState, items: Routed,
                       results: list[RouteResult], born: set[str], touched: set[str], row_ids: list[int]) -> None:
    """Give routed pending messages (rows ``row_ids``) their world and vector, and write the worlds
    routing created or moved; the rows are read as their worlds' from now on."""
    await write_worlds(conn, scope, state, items, results, born, touched)
    await records.place_pending(
        conn, [(r.world_id, to_blob(v), row) for (_, v), r, row in zip(items, results, row_ids)])


async def persist(conn: aiosqlite.Connection, scope: str, state: ScopeState, items: Routed,
                  results: list[RouteResult], born: set[str], touched: set[str],
                  fitted: dict[int, chattext.Searchable]) -> None:
    """Store routed messages (with their search text and tokens, ``fitted`` by ``id()`` of the
    message: chattext.fit) and the worlds routing created or moved."""
    await write_worlds(conn, scope, state, items, results, born, touched)
    await records.insert_routed(
        conn, [(scope, r.world_id, m.channel, m.message_id, m.author, m.author_id, m.text.strip(),
          iso(aware(m.ts)), to_blob(v), fitted[id(m)].text, fitted[id(m)].terms)
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
    await records.insert_worlds(
        conn, [(wid, scope, state.worlds[wid].audience, initial_topic(first_text[wid]),
          to_blob(state.index_of(wid).vector(wid)), state.worlds[wid].access_count, iso(first_ts[wid]),
          iso(last_ts[wid])) for wid in born])
    await records.update_worlds(
        conn, [(to_blob(state.index_of(wid).vector(wid)), state.worlds[wid].access_count, iso(last_ts[wid]),
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
    moving = await records.channel_outside(db, scope, channel, audience)
    cache.forget_channel(scope, channel)
    if not moving:
        async with db.transaction() as conn:
            await audience_store.record(conn, scope, channel, audience)
            await records.move_pending(conn, scope, channel, audience)
        return set()
    fresh = ChannelState()
    items = [(MemoryMessage(scope, channel, r["message_id"], r["author"], r["text"], parse_ts(r["ts"]),
                            audience), from_blob(r["embedding"])) for r in moving]
    results = []
    for i, (message, vec) in enumerate(items):
        results.append(router.route(cfg, state, fresh, message, vec, audience))
        if i % MOVE_SLICE == MOVE_SLICE - 1:
            await asyncio.sleep(0)  # a long channel moves without stalling everything else
    born = {r.world_id for r in results if r.action == "birth"}
    touched = {r.world_id for r in results} - born
    left = {r["world_id"] for r in moving}
    try:
        async with db.transaction() as conn:
            await write_worlds(conn, scope, state, items, results, born, touched)
            await records.set_worlds_of(conn, [(res.world_id, r["id"]) for r, res in zip(moving, results)])
            with_beliefs = await audience_store.move_beliefs(
                conn, scope, {r["id"]: res.world_id for r, res in zip(moving, results)})
            recentred = {wid: await lifecycle.recentre(conn, wid) for wid in left}
            for wid in left:  # their names drew on what moved away: provisional ones until renamed
                await audience_store.rename_provisionally(conn, wid)
            await audience_store.record(conn, scope, channel, audience)
            await records.move_pending(conn, scope, channel, audience)
    except BaseException:
        cache.forget(scope)  # the database is the truth: reload it on next use
        raise
    for wid, found in recentred.items():
        if found is not None:
            state.set_centroid(wid, *found)
    await remove_dead(db, cache, scope)
    changed = (left | born | touched | with_beliefs) & set(state.worlds)
    await cache.refresh_maturity(scope, sorted(changed))
    log.info("memory: %d messages of %s/%s moved to audience %r", len(moving), scope, channel, audience)
    return changed


# -- forgetting --------------------------------------------------------------------------

async def forget_scope(db: Database, cache: ScopeCache, scope: str) -> tuple[dict[str, int], Forgotten]:
    """Delete everything a scope remembers; returns how many messages, beliefs and worlds went,
    and their ids."""
    async with db.transaction() as conn:
        ids, worlds = await records.delete_scope(conn, scope)
    cache.forget(scope)
    await purge_search_index(db)
    return ({"messages": len(ids["memory_messages"]), "beliefs": len(ids["beliefs"]), "worlds": worlds},
            Forgotten(scope, ids["memory_messages"], ids["beliefs"]))


async def forget_where(db: Database, cache: ScopeCache, scope: str, where: str | None, args: tuple,
                       belief_ids: Sequence[int] = ()) -> tuple[dict[str, int], Forgotten, set[str]]:
    """Forget the scope's messages matching ``where`` (None: none), the beliefs resting only on them,
    the beliefs named in ``belief_ids`` and the worlds left empty; the worlds that lost messages or
    beliefs are recentred on what they still hold and named provisionally after it, and the scope's
    merge history loses the names of the worlds it absorbed (both drew on what was said). The
    keyword index follows the rows (its triggers and generated columns; SQLite's full-text segments
    are merged so the forgotten words leave them too); the caller drops the scope's vectors
    (MessageIndex). Returns the counts, the ids of what was forgotten, and the worlds still alive
    that lost something (to be named again properly)."""
    state = await cache.scope(scope, locked=True)
    async with db.transaction() as conn:
        forgotten, touched = await lifecycle.forget_messages(conn, scope, where, args, belief_ids)
        recentred = {wid: await lifecycle.recentre(conn, wid) for wid in touched}
        if touched:
            for wid in touched:
                await audience_store.rename_provisionally(conn, wid)
            await lifecycle.forget_merge_topics(conn, scope)
    for wid, found in recentred.items():
        if found is not None:
            state.set_centroid(wid, *found)
    removed = await remove_dead(db, cache, scope)
    if touched:
        await purge_search_index(db)
    await cache.refresh_maturity(scope, [w for w in touched if w in state.worlds])
    return ({"messages": len(forgotten.messages), "beliefs": len(forgotten.beliefs), "worlds": removed}, forgotten,
            touched & set(state.worlds))


async def purge_search_index(db: Database) -> None:
    """SQLite's full-text indexes drop what deleted rows held only when their segments are merged:
    until then a forgotten word still lies in them. Merge them all now (PostgreSQL's search
    vectors live in the rows themselves)."""
    if db.dialect != "sqlite":
        return
    async with db.transaction() as conn:
        for table in ("memory_messages_fts", "beliefs_fts"):
            await conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")


async def remove_dead(db: Database, cache: ScopeCache, scope: str | None) -> int:
    """Delete the worlds left with no messages and no beliefs (``scope`` None: in every scope)."""
    dead = await lifecycle.remove_dead(db, scope)
    cache.drop_worlds(dead)
    return len(dead)
