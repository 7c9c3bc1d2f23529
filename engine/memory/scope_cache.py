"""The in-memory side of each scope: its worlds, their centroid indexes and the channels' recent
messages, loaded from the database and reloaded when another process changed it.

The database is the truth; this cache exists for routing speed. A scope is loaded on first use;
before each use the database's change token (engine/db: SQLite's data_version, PostgreSQL's
LISTEN/NOTIFY) tells whether another process committed meanwhile, and the scope's
stamp (memory_scope_stamps) whether that commit touched this scope, so a `python -m bot import`
or `merge` running beside the bot is seen before the bot next routes or answers. Writes to a scope
happen under its lock (``lock``); whoever fails half-way through a write calls ``forget`` so the
next use reloads from the database. Archived worlds (engine.memory.lifecycle) are not loaded: they
are out of routing (``in_use``, the one rule of which worlds are).

This module owns ``memory_scope_stamps`` (tests/test_sql_owners.py).
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

import numpy as np

from engine.config import MemorySection
from engine.db import Database
from engine.embedder import Embedder
from engine.memory import beliefs as belief_store, records, router
from engine.memory.index import CentroidIndex
from engine.memory.models import WorldState, from_blob, maturity, parse_ts
from engine.offload import run_cpu

# Speakers whose running mean a scope keeps for routing ([memory] speaker_prior): 1.5 KB each (e5).
SPEAKERS_KEPT = 2000


def in_use(alias: str = "") -> str:
    """The SQL condition of a world in use: not archived (routed into, listed, in digests);
    ``alias``: 'w.'."""
    return f"{alias}archived_at IS NULL"


@dataclass
class ScopeState:
    indexes: dict[str, CentroidIndex]     # audience -> the centroids of its worlds
    worlds: dict[str, WorldState]
    new_index: Callable[[], CentroidIndex]
    change_token: int = 0   # the database's change token when last checked
    stamp: int = 0          # memory_scope_stamps.stamp when last checked
    centre_sum: np.ndarray | None = None   # [memory] routing_centre: the prior + the scope's messages
    fixed: np.ndarray | None = None        # [memory] routing_directions: the model's, projected out too
    # [memory] speaker_prior: per author, the sum of their messages' vectors and their count, in memory
    # only, the SPEAKERS_KEPT who spoke last (one who comes back after that starts again as a newcomer)
    speakers: OrderedDict[str, tuple[np.ndarray, int]] = field(default_factory=OrderedDict)

    def centre(self) -> np.ndarray | None:
        """What routing projects out of its similarities (router.centred): the unit mean direction
        of the scope's messages and the model's fixed directions; None without centring."""
        if self.centre_sum is None:
            return None
        return router.projection_basis(self.fixed, self.centre_sum / max(float(np.linalg.norm(self.centre_sum)), 1e-12))

    def count_in_centre(self, vec: np.ndarray) -> None:
        if self.centre_sum is not None:
            self.centre_sum += vec

    def speaker(self, author: str) -> tuple[np.ndarray, int] | None:
        """The sum of ``author``'s message vectors in this scope and their count, or None."""
        return self.speakers.get(author)

    def count_speaker(self, author: str, vec: np.ndarray) -> None:
        if self.centre_sum is not None:
            total, n = self.speakers.pop(author, (np.zeros(len(vec), dtype=np.float32), 0))
            self.speakers[author] = (total + vec, n + 1)
            if len(self.speakers) > SPEAKERS_KEPT:
                self.speakers.popitem(last=False)

    def index(self, audience: str) -> CentroidIndex:
        found = self.indexes.get(audience)
        if found is None:
            found = self.indexes[audience] = self.new_index()
        return found

    def index_of(self, world_id: str) -> CentroidIndex:
        return self.index(self.worlds[world_id].audience)

    def set_centroid(self, world_id: str, centroid: np.ndarray, count: int) -> None:
        """Mirror a world recentred in storage (after forgetting or moving messages)."""
        if world_id in self.worlds:
            self.index_of(world_id).upsert(world_id, centroid)
            self.worlds[world_id].access_count = self.worlds[world_id].evidence = count


@dataclass
class ChannelState:
    world_id: str | None = None
    last_ts: datetime | None = None
    recent: deque = field(default_factory=deque)   # (ts, vector, world id) of recent contentful messages


async def stamp(db: Database, scope: str) -> int:
    return await db.fetchval("SELECT stamp FROM memory_scope_stamps WHERE scope=?", (scope,), 0)


async def move_every_stamp(conn: Any) -> None:
    """Within a transaction (``conn``): every scope's stamp moves on, so every process reloads
    what it holds of any scope before its next use (its vectors were refitted)."""
    await conn.execute("UPDATE memory_scope_stamps SET stamp = stamp + 1")


async def maturities(db: Database, world_ids: list[str]) -> dict[str, float]:
    inputs = await belief_store.world_maturity_inputs(db, world_ids)
    return {w: maturity(c, n) for w, (c, n) in inputs.items()}


async def prior_centre(embedder: Embedder) -> np.ndarray:
    """PRIOR_WEIGHT x the mean of router.PRIOR_LINES, embedded once per process and model."""
    found = _priors.get(embedder.model_name)
    if found is None:
        vectors = await embedder.embed(list(router.PRIOR_LINES))
        found = _priors[embedder.model_name] = vectors.mean(axis=0) * router.PRIOR_WEIGHT
    return found


_priors: dict[str, np.ndarray] = {}


async def load_scope(db: Database, embedder: Embedder, cfg: MemorySection, scope: str) -> ScopeState:
    """A scope's worlds and one centroid index per audience, built off the event loop. The centre
    (routing_centre) is the prior plus each world's centroid counted once per message it holds."""
    version, scope_stamp = await db.change_token(), await stamp(db, scope)
    rows = await records.worlds_with_evidence(db, scope, in_use('w.'))
    mature = await maturities(db, [r["id"] for r in rows])
    worlds = {r["id"]: WorldState(r["id"], r["access_count"], r["evidence"], r["topic_size"],
                                  mature.get(r["id"], 0.0), r["audience"]) for r in rows}
    dim = len(rows[0]["centroid"]) // 4 if rows else await run_cpu(lambda: embedder.dim)

    def new_index() -> CentroidIndex:
        return CentroidIndex(dim, cfg.index_m, cfg.index_ef_construction, cfg.index_ef)

    indexes: dict[str, CentroidIndex] = {}
    centre = (await prior_centre(embedder)).astype(np.float64) if cfg.routing_centre else None
    for audience in sorted({r["audience"] for r in rows}):
        part = [r for r in rows if r["audience"] == audience]
        vectors = np.frombuffer(b"".join(r["centroid"] for r in part), dtype=np.float32).reshape(len(part), dim)
        indexes[audience] = new_index()
        await run_cpu(indexes[audience].build, [r["id"] for r in part], vectors)
        if centre is not None:
            centre += np.asarray([r["evidence"] for r in part], dtype=np.float64) @ vectors
    fixed = router.fixed_directions(embedder.model_name, cfg.routing_directions) if centre is not None else None
    return ScopeState(indexes, worlds, new_index, version, scope_stamp, centre, fixed)


async def load_channel(db: Database, cfg: MemorySection, scope: str, channel: str) -> ChannelState:
    """A channel's current world and its recent contentful messages, from its newest stored ones."""
    state = ChannelState()
    rows = await records.latest_routed(db, scope, channel, max(cfg.context_messages, 1))
    if rows:
        state.world_id, state.last_ts = rows[0]["world_id"], parse_ts(rows[0]["ts"])
        for r in reversed(rows):
            if not router.is_short(cfg, r["text"]):
                state.recent.append((parse_ts(r["ts"]), from_blob(r["embedding"]), r["world_id"]))
    return state


class ScopeCache:
    """The loaded scopes and channels of one engine, and the lock of each scope."""

    def __init__(self, db: Database, embedder: Embedder, cfg: MemorySection):
        self.db, self.embedder, self.cfg = db, embedder, cfg
        self.scopes: dict[str, ScopeState] = {}
        self.channels: dict[tuple[str, str], ChannelState] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, scope: str) -> asyncio.Lock:
        return self._locks.setdefault(scope, asyncio.Lock())

    async def scope(self, scope: str, locked: bool = False) -> ScopeState:
        """The scope's worlds and index, loaded from the database on first use and again after
        another process (an import, a merge from the command line) changed them.
        ``locked``: the caller holds the scope's lock."""
        state = self.scopes.get(scope)
        if state is not None and await self._changed_elsewhere(scope, state):
            if locked:
                self.forget(scope)
            else:
                async with self.lock(scope):  # never drop a state an ingest is half-way through
                    if self.scopes.get(scope) is state:
                        self.forget(scope)
            state = None
        if state is not None:
            return state
        loaded = await load_scope(self.db, self.embedder, self.cfg, scope)
        return self.scopes.setdefault(scope, loaded)  # another task may have loaded it meanwhile

    async def _changed_elsewhere(self, scope: str, state: ScopeState) -> bool:
        """True when another process committed since the last check and this scope's stamp
        moved. The change token only moves for other processes' commits, so the check costs one
        call while nobody else writes; the stamp also counts this engine's own writes, so a
        scope it wrote to in the meantime is reloaded once more than strictly needed."""
        version = await self.db.change_token()
        if version == state.change_token:
            return False
        if await stamp(self.db, scope) == state.stamp:
            state.change_token = version
            return False
        return True

    async def channel(self, scope: str, channel: str) -> ChannelState:
        key = (scope, channel)
        state = self.channels.get(key)
        if state is None:
            state = self.channels[key] = await load_channel(self.db, self.cfg, scope, channel)
        return state

    async def refresh_maturity(self, scope: str, world_ids: list[str]) -> None:
        state = self.scopes.get(scope)
        if state is None:
            return
        mature = await maturities(self.db, world_ids)
        for wid in world_ids:
            if wid in state.worlds:
                state.worlds[wid].maturity = mature.get(wid, 0.0)

    def drop_worlds(self, dead: list[tuple[str, str]]) -> None:
        """Forget worlds removed from storage, given as (scope, world id)."""
        for scope, wid in dead:
            state = self.scopes.get(scope)
            if state is not None and wid in state.worlds:
                state.index_of(wid).remove(wid)
                del state.worlds[wid]

    def redirect_channels(self, gone: str, keep: str) -> None:
        """Channels talking in a world that merged into another now talk in that one, and their
        recent messages in it (routing's context: router.route) count as the kept world's."""
        for ch in self.channels.values():
            if ch.world_id == gone:
                ch.world_id = keep
            ch.recent = deque((ts, vec, keep if wid == gone else wid) for ts, vec, wid in ch.recent)

    def forget_channel(self, scope: str, channel: str) -> None:
        self.channels.pop((scope, channel), None)

    def forget_channels(self, scope: str) -> None:
        for key in [k for k in self.channels if k[0] == scope]:
            del self.channels[key]

    def forget(self, scope: str) -> None:
        """Drop the scope and its channels: the next use reloads them from the database."""
        self.scopes.pop(scope, None)
        self.forget_channels(scope)
