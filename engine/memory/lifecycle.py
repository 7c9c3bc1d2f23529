"""World lifecycle in storage: merging near-duplicate worlds, removing dead ones, forgetting.

The engine calls these under the scope's lock; ``merge_scope`` also mirrors its merges in the
scope cache, the others leave that to their callers (engine.memory.storage).
"""
from __future__ import annotations

import json

import aiosqlite
import numpy as np

from engine.db import Database
from engine.memory.beliefs import fold_duplicates
from engine.memory.index import CentroidIndex
from engine.memory.models import WorldState, iso, to_blob, utcnow
from engine.memory.router import normalise
from engine.memory.scope_cache import ScopeCache, ScopeState
from engine.offload import run_cpu


def merge_pairs(index: CentroidIndex, threshold: float) -> list[tuple[str, str, float]]:
    """Disjoint pairs of worlds at least ``threshold`` similar, most similar first."""
    ids = index.ids()
    if len(ids) < 2:
        return []
    vectors = index.vectors(ids)
    pairs = []
    for wid, found in zip(ids, index.search_many(vectors, 2)):
        for other, sim in found:
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
        async with conn.execute("SELECT topic, created_at, last_active FROM worlds WHERE id=?", (gone.id,)) as cur:
            old = await cur.fetchone()
        await conn.execute("UPDATE memory_messages SET world_id=? WHERE world_id=?", (keep.id, gone.id))
        await conn.execute("UPDATE beliefs SET world_id=? WHERE world_id=?", (keep.id, gone.id))
        await fold_duplicates(conn, keep.id)
        await conn.execute(
            "UPDATE worlds SET centroid=?, access_count=?,"
            " created_at=CASE WHEN created_at < ? THEN created_at ELSE ? END,"
            " last_active=CASE WHEN last_active > ? THEN last_active ELSE ? END WHERE id=?",
            (to_blob(centroid), keep.access_count + gone.access_count, old["created_at"], old["created_at"],
             old["last_active"], old["last_active"], keep.id))
        await conn.execute(
            "INSERT INTO world_merges(scope, audience, kept_id, absorbed_id, absorbed_topic, similarity, merged_at)"
            " VALUES (?,?,?,?,?,?,?)", (scope, keep.audience, keep.id, gone.id, old["topic"], similarity, iso(utcnow())))
        await conn.execute("DELETE FROM worlds WHERE id=?", (gone.id,))


async def merge_scope(db: Database, cache: ScopeCache, scope: str, state: ScopeState,
                      threshold: float) -> list[dict]:
    """Merge every pair of worlds at least ``threshold`` similar until none is left, within each
    audience (worlds never merge across audiences). The larger world of a pair absorbs the other;
    returns one {"kept", "absorbed", "similarity"} per merge, in order."""
    merged = []
    for index in list(state.indexes.values()):
        while pairs := await run_cpu(merge_pairs, index, threshold):
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
    where = "AND scope=?" if scope else ""
    async with db.transaction() as conn:
        async with conn.execute(
                "DELETE FROM worlds WHERE NOT EXISTS (SELECT 1 FROM memory_messages m WHERE m.world_id=worlds.id) "
                f"AND NOT EXISTS (SELECT 1 FROM beliefs b WHERE b.world_id=worlds.id) {where} RETURNING scope, id",
                (scope,) if scope else ()) as cur:
            return [(r["scope"], r["id"]) for r in await cur.fetchall()]


async def forget_messages(conn: aiosqlite.Connection, scope: str, where: str,
                          args: tuple) -> tuple[int, int, set[str]]:
    """Delete the scope's messages matching ``where`` (one channel's, one author's) and the
    beliefs resting only on them.

    Returns (messages removed, beliefs removed, worlds touched). Beliefs that also rest on
    other messages stay, without the forgotten sources.
    """
    async with conn.execute(f"SELECT id, world_id FROM memory_messages WHERE scope=? AND {where}",
                            (scope, *args)) as cur:
        rows = await cur.fetchall()
    gone = {r["id"] for r in rows}
    touched = {r["world_id"] for r in rows}
    removed_beliefs = 0
    if gone:
        async with conn.execute("SELECT id, world_id, sources FROM beliefs WHERE scope=?", (scope,)) as cur:
            beliefs = await cur.fetchall()
        for b in beliefs:
            sources = json.loads(b["sources"])
            if not any(s in gone for s in sources):
                continue
            kept = [s for s in sources if s not in gone]
            touched.add(b["world_id"])
            if kept:
                await conn.execute("UPDATE beliefs SET sources=? WHERE id=?", (json.dumps(kept), b["id"]))
            else:
                await conn.execute("UPDATE beliefs SET superseded_by=NULL WHERE superseded_by=?", (b["id"],))
                await conn.execute("DELETE FROM beliefs WHERE id=?", (b["id"],))
                removed_beliefs += 1
        await conn.execute(f"DELETE FROM memory_messages WHERE scope=? AND {where}", (scope, *args))
    return len(gone), removed_beliefs, touched


async def recentre(conn: aiosqlite.Connection, world_id: str) -> tuple[np.ndarray, int] | None:
    """Centroid and count recomputed from what a world still holds (after forgetting);
    None when it holds nothing."""
    async with conn.execute("SELECT embedding FROM memory_messages WHERE world_id=?", (world_id,)) as cur:
        rows = await cur.fetchall()
    count = len(rows)
    if not rows:
        async with conn.execute("SELECT embedding FROM beliefs WHERE world_id=?", (world_id,)) as cur:
            rows = await cur.fetchall()
    if not rows:
        return None
    matrix = np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    centroid = normalise(matrix.mean(axis=0))
    await conn.execute("UPDATE worlds SET centroid=?, access_count=? WHERE id=?",
                       (to_blob(centroid), count, world_id))
    return centroid, count
