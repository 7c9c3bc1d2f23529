"""World lifecycle in storage: merging near-duplicate worlds, archiving quiet ones, removing
dead ones, forgetting.

As the WorldNodes design has it, worlds are born, grow, merge, fade and die. Fading is decay:
belief confidence halves every half-life and a belief below the floor is retired
(engine.memory.beliefs); a world left with no belief in recall (every one retired or
superseded, at least one retired) and without a message for ``world_ttl_days`` is archived
(``archive_quiet``): out of routing, /worlds and digests, its messages still recallable as
evidence. Nothing is deleted by decay; a world dies (``remove_dead``) only when it holds nothing,
after forgetting or a merge.

The engine calls these under the scope's lock; ``merge_scope`` also mirrors its merges in the
scope cache, the others leave that to their callers (engine.memory.storage).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

import aiosqlite
import numpy as np

from engine.db import Database
from engine.memory import beliefs as belief_store, records
from engine.memory.index import CentroidIndex
from engine.memory.models import Forgotten, WorldState, iso, to_blob, utcnow
from engine.memory.router import centred, normalise
from engine.memory.scope_cache import ScopeCache, ScopeState, in_use
from engine.offload import run_cpu


def merge_pairs(index: CentroidIndex, threshold: float,
                basis: np.ndarray | None = None) -> list[tuple[str, str, float]]:
    """Disjoint pairs of worlds at least ``threshold`` similar (router.centred with the scope's
    ``basis``), most similar first."""
    ids = index.ids()
    if len(ids) < 2:
        return []
    vectors = index.vectors(ids)
    row = {wid: i for i, wid in enumerate(ids)}
    pairs = []
    for wid, found in zip(ids, index.search_many(vectors, 2)):
        for other, sim in found:
            if basis is not None and other != wid:
                sim = centred(vectors[row[wid]], vectors[row[other]], basis)
            if other != wid and sim >= threshold and wid < other:
                pairs.append((wid, other, sim))
    pairs.sort(key=lambda p: -p[2])
    used: set[str] = set()
    chosen = []
    for a, b, sim in pairs:
        if a not in used and b not in used:
            used |= {a, b}
            chosen.append((a, b, sim))
    return chosen


async def merge_worlds(db: Database, scope: str, keep: WorldState, gone: WorldState, centroid: np.ndarray,
                       similarity: float) -> None:
    """Move the messages and beliefs of ``gone`` into ``keep``, sum the counters, record the merge."""
    async with db.transaction() as conn:
        old = await records.world_dates(conn, gone.id)
        await records.move_world_messages(conn, gone.id, keep.id)
        await belief_store.move_world(conn, gone.id, keep.id)
        await belief_store.fold_duplicates(conn, keep.id)
        await records.absorb(conn, keep.id, to_blob(centroid), keep.access_count + gone.access_count,
                             old["created_at"], old["last_active"])
        await records.insert_merge(conn, scope, keep.audience, keep.id, gone.id, old["topic"], similarity,
                                   iso(utcnow()))
        await records.delete_world(conn, gone.id)


async def forget_merge_topics(conn, scope: str) -> None:
    """The scope's merge history keeps the merges but not the names of the worlds absorbed: a
    name drew on messages that may have been forgotten, and a message may have moved since."""
    await records.clear_merge_topics(conn, scope)


async def merge_scope(db: Database, cache: ScopeCache, scope: str, state: ScopeState,
                      threshold: float) -> list[dict]:
    """Merge every pair of worlds at least ``threshold`` similar until none is left, within each
    audience (worlds never merge across audiences). The larger world of a pair absorbs the other;
    returns one {"kept", "absorbed", "similarity"} per merge, in order."""
    merged = []
    for index in list(state.indexes.values()):
        while pairs := await run_cpu(merge_pairs, index, threshold, state.centre()):
            for a, b, sim in pairs:
                wa, wb = state.worlds[a], state.worlds[b]
                keep, gone = (wa, wb) if (wa.access_count, wb.id) >= (wb.access_count, wa.id) else (wb, wa)
                centroid = normalise(index.vector(keep.id) * keep.access_count
                                     + index.vector(gone.id) * gone.access_count)
                await merge_worlds(db, scope, keep, gone, centroid, sim)
                index.upsert(keep.id, centroid)
                index.remove(gone.id)
                del state.worlds[gone.id]
                keep.access_count += gone.access_count
                keep.evidence += gone.evidence
                cache.redirect_channels(gone.id, keep.id)
                await cache.refresh_maturity(scope, [keep.id])
                merged.append({"kept": keep.id, "absorbed": gone.id, "similarity": round(sim, 4)})
    return merged


async def remove_dead(db: Database, scope: str | None = None) -> list[tuple[str, str]]:
    """Delete worlds with no beliefs and no messages; returns their (scope, id)."""
    return await records.delete_empty_worlds(db, scope)


async def archive_quiet(db: Database, scope: str, now: datetime, ttl_days: float) -> list[tuple[str, str]]:
    """Archive the scope's worlds in use that hold no belief in recall any more, at least one
    retired, and no message since ``ttl_days`` before ``now``; returns their (scope, id). Their
    messages and beliefs stay."""
    cutoff = iso(now - timedelta(days=ttl_days))
    return await records.archive_worlds(db, scope, iso(now), in_use(), cutoff, belief_store.in_recall("b."))


async def forget_messages(conn: aiosqlite.Connection, scope: str, where: str | None, args: tuple,
                          beliefs: Sequence[int] = ()) -> tuple[Forgotten, set[str]]:
    """Delete the scope's messages matching ``where`` (one channel's, one author's, these ids;
    None: no message), the beliefs resting only on them and the beliefs named in ``beliefs``.

    Returns what was forgotten (the ids of the messages and beliefs removed) and the worlds
    touched. Beliefs that also rest on other messages stay, without the forgotten sources.
    """
    rows: list = []
    if where is not None:
        rows = await records.matching(conn, scope, where, args)
    gone = {r["id"] for r in rows}
    named = set(beliefs)
    touched = {r["world_id"] for r in rows if r["world_id"] is not None}   # a pending message has no world
    removed_beliefs: set[int] = set()
    if gone or named:
        for belief_id, world_id, sources in await belief_store.sourced(conn, scope):
            if belief_id not in named and not any(s in gone for s in sources):
                continue
            kept = [] if belief_id in named else [s for s in sources if s not in gone]
            touched.add(world_id)
            if kept:
                await belief_store.set_sources(conn, belief_id, kept)
            else:
                await belief_store.delete(conn, belief_id)
                removed_beliefs.add(belief_id)
        if gone and where is not None:   # gone is empty where there is no condition
            await records.delete_matching(conn, scope, where, args)
    return Forgotten(scope, frozenset(gone), frozenset(removed_beliefs)), touched


async def centroid_of(conn: aiosqlite.Connection, world_id: str) -> tuple[np.ndarray, int] | None:
    """The normalised mean of a world's message vectors (of its beliefs' when it holds no
    message) and how many messages it holds; None when it holds nothing."""
    rows = await records.embeddings_of(conn, world_id)
    count = len(rows)
    if not rows:
        rows = await belief_store.embeddings_of(conn, world_id)
    if not rows:
        return None
    matrix = np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return normalise(matrix.mean(axis=0)), count


async def recentre(conn: aiosqlite.Connection, world_id: str) -> tuple[np.ndarray, int] | None:
    """Centroid and count recomputed from what a world still holds (after forgetting);
    None when it holds nothing."""
    found = await centroid_of(conn, world_id)
    if found is not None:
        await records.set_centroid_count(conn, world_id, to_blob(found[0]), found[1])
    return found
