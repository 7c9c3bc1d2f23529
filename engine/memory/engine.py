"""MemoryEngine: the WorldNodes memory of every chat scope, behind one facade.

State per scope lives in the database (worlds, messages, beliefs, merges) and, for routing
speed, in memory (an hnswlib index of centroids, counters and maturity per world, the recent
messages of each channel). The memory side is rebuilt from the database whenever a scope is
first used, so a restart loses nothing. Writes to a scope happen under that scope's lock;
every query names its scope, so nothing crosses scopes.

Inside a scope, memory is partitioned by audience (engine.memory.audience): each audience has
its own worlds and its own centroid index, a message is routed only among its channel's
audience's worlds, and every query takes a Viewer and sees only the audiences it may.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np

from engine.config import MemorySection
from engine.db import Database
from engine.embedder import Embedder
from engine.llm.errors import InvalidAnswer
from engine.memory import audience as audience_store
from engine.memory import beliefs as belief_store
from engine.memory import lifecycle, recall as recall_mod, router, topics
from engine.memory.audience import PUBLIC, Viewer
from engine.memory.beliefs import BELIEF_COLUMNS, NewBelief, belief_from_row
from engine.memory.extraction import Extraction, ExtractionScheduler, prompt as extraction_prompt
from engine.memory.index import CentroidIndex
from engine.memory.models import (AskResult, Belief, MemoryMessage, RecallResult, RouteResult, WorldInfo,
                                  WorldState, from_blob, iso, maturity, new_world_id, parse_ts, to_blob,
                                  utcnow)
from engine.offload import run_cpu

log = logging.getLogger(__name__)

INGEST_CHUNK = 256
TOPIC_SAMPLE = 30          # newest messages per world that topic naming reads
TOPIC_LLM_PER_PASS = 20    # LLM topic names per refresh pass; the rest keep keyword names
TOPIC_CONTRAST = 300       # other worlds a keyword topic is contrasted with
MOVE_SLICE = 16            # messages re-routed between yields to the event loop when a channel moves


@dataclass
class ScopeState:
    indexes: dict[str, CentroidIndex]     # audience -> the centroids of its worlds
    worlds: dict[str, WorldState]
    new_index: Callable[[], CentroidIndex]
    data_version: int = 0   # the connection's PRAGMA data_version when last checked
    stamp: int = 0          # memory_scope_stamps.stamp when last checked

    def index(self, audience: str) -> CentroidIndex:
        found = self.indexes.get(audience)
        if found is None:
            found = self.indexes[audience] = self.new_index()
        return found

    def index_of(self, world_id: str) -> CentroidIndex:
        return self.index(self.worlds[world_id].audience)


@dataclass
class ChannelState:
    world_id: str | None = None
    last_ts: datetime | None = None
    recent: deque = field(default_factory=deque)   # (ts, vector) of recent contentful messages


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


class MemoryEngine:
    def __init__(self, db: Database, embedder: Embedder, config: MemorySection, llm: Any = None):
        self.db = db
        self.embedder = embedder
        self.cfg = config
        self.llm = llm            # engine.llm.client.LLMClient or None
        self._scopes: dict[str, ScopeState] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._channels: dict[tuple[str, str], ChannelState] = {}
        self._topic_dirty: dict[str, set[str]] = {}
        self._topic_tasks: dict[str, asyncio.Task] = {}
        self.extraction = ExtractionScheduler(self._extract_channel, config.extract_every_n,
                                              config.extract_every_s)

    # -- start-up and state ------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Remove dead worlds, rebuild every scope's index, queue unfinished extraction."""
        dead = await lifecycle.remove_dead(self.db)
        scopes = [r["scope"] for r in await self.db.fetchall("SELECT DISTINCT scope FROM worlds")]
        for scope in scopes:
            await self._scope(scope)
        if self.llm is not None:
            for row in await self.db.fetchall(
                    "SELECT scope, channel, count(*) AS n FROM memory_messages WHERE extracted=0 "
                    "GROUP BY scope, channel"):
                self.extraction.note(row["scope"], row["channel"], row["n"])
        return {"scopes": len(scopes), "removed": len(dead)}

    async def close(self) -> None:
        await self.extraction.close()
        for task in self._topic_tasks.values():
            task.cancel()
        if self._topic_tasks:
            await asyncio.gather(*self._topic_tasks.values(), return_exceptions=True)

    def _lock(self, scope: str) -> asyncio.Lock:
        return self._locks.setdefault(scope, asyncio.Lock())

    async def _scope(self, scope: str, locked: bool = False) -> ScopeState:
        """The scope's worlds and index, loaded from the database on first use and again after
        another process (an import, a merge from the command line) changed them.
        ``locked``: the caller holds the scope's lock."""
        state = self._scopes.get(scope)
        if state is not None and await self._changed_elsewhere(scope, state):
            if locked:
                self._forget_state(scope)
            else:
                async with self._lock(scope):  # never drop a state an ingest is half-way through
                    if self._scopes.get(scope) is state:
                        self._forget_state(scope)
            state = None
        if state is not None:
            return state
        data_version, stamp = await self._data_version(), await self._stamp(scope)
        rows = await self.db.fetchall(
            "SELECT w.id, w.audience, w.centroid, w.access_count, w.topic_size, "
            "(SELECT count(*) FROM memory_messages m WHERE m.world_id = w.id) AS evidence "
            "FROM worlds w WHERE w.scope=? ORDER BY w.created_at", (scope,))
        mature = await self._maturities([r["id"] for r in rows])
        worlds = {r["id"]: WorldState(r["id"], r["access_count"], r["evidence"], r["topic_size"],
                                      mature.get(r["id"], 0.0), r["audience"]) for r in rows}
        dim = len(rows[0]["centroid"]) // 4 if rows else await run_cpu(lambda: self.embedder.dim)

        def new_index() -> CentroidIndex:
            return CentroidIndex(dim, self.cfg.index_m, self.cfg.index_ef_construction, self.cfg.index_ef)

        indexes: dict[str, CentroidIndex] = {}
        for audience in sorted({r["audience"] for r in rows}):
            part = [r for r in rows if r["audience"] == audience]
            vectors = np.frombuffer(b"".join(r["centroid"] for r in part), dtype=np.float32).reshape(len(part), dim)
            indexes[audience] = new_index()
            await run_cpu(indexes[audience].build, [r["id"] for r in part], vectors)
        state = self._scopes.get(scope)  # another task may have loaded it meanwhile
        if state is None:
            state = self._scopes[scope] = ScopeState(indexes, worlds, new_index, data_version, stamp)
        return state

    async def _data_version(self) -> int:
        return await self.db.fetchval("PRAGMA data_version")

    async def _stamp(self, scope: str) -> int:
        return await self.db.fetchval("SELECT stamp FROM memory_scope_stamps WHERE scope=?", (scope,), 0)

    async def _changed_elsewhere(self, scope: str, state: ScopeState) -> bool:
        """True when another connection committed since the last check and this scope's stamp
        moved. data_version only moves for other connections' commits, so the check costs one
        pragma while nobody else writes; the stamp also counts this engine's own writes, so a
        scope it wrote to in the meantime is reloaded once more than strictly needed."""
        data_version = await self._data_version()
        if data_version == state.data_version:
            return False
        if await self._stamp(scope) == state.stamp:
            state.data_version = data_version
            return False
        return True

    async def _maturities(self, world_ids: list[str]) -> dict[str, float]:
        inputs = await belief_store.world_maturity_inputs(self.db.conn, world_ids)
        return {w: maturity(c, n) for w, (c, n) in inputs.items()}

    async def _refresh_maturity(self, scope: str, world_ids: list[str]) -> None:
        state = self._scopes.get(scope)
        if state is None:
            return
        mature = await self._maturities(world_ids)
        for wid in world_ids:
            if wid in state.worlds:
                state.worlds[wid].maturity = mature.get(wid, 0.0)

    async def _channel(self, scope: str, channel: str) -> ChannelState:
        key = (scope, channel)
        state = self._channels.get(key)
        if state is None:
            state = ChannelState()
            rows = await self.db.fetchall(
                "SELECT world_id, ts, text, embedding FROM memory_messages WHERE scope=? AND channel=? "
                "ORDER BY id DESC LIMIT ?", (scope, channel, max(self.cfg.context_messages, 1)))
            if rows:
                state.world_id, state.last_ts = rows[0]["world_id"], parse_ts(rows[0]["ts"])
                for r in reversed(rows):
                    if not router.is_short(self.cfg, r["text"]):
                        state.recent.append((parse_ts(r["ts"]), from_blob(r["embedding"])))
            self._channels[key] = state
        return state

    # -- ingest ------------------------------------------------------------------------

    async def ingest(self, message: MemoryMessage) -> RouteResult | None:
        """Route one message into a world and store it; None when empty or already stored."""
        results = await self.ingest_many([message])
        return results[0] if results else None

    async def ingest_many(self, messages: list[MemoryMessage],
                          progress: Callable[[int, int], Any] | None = None) -> list[RouteResult]:
        """Ingest messages in order with batched embeddings; each chunk of up to INGEST_CHUNK
        messages, whatever scopes it spans, is stored in one transaction. Messages already stored
        (same scope, channel and platform id) and empty ones are skipped. ``progress(done, total)``
        may be async."""
        total = len(messages)
        results: list[RouteResult] = []
        done = 0
        for start in range(0, total, INGEST_CHUNK):
            chunk = await self._new_only(messages[start:start + INGEST_CHUNK])
            if chunk:
                vectors = await self.embedder.embed([m.text.strip() for m in chunk])
                by_scope: dict[str, list[tuple[MemoryMessage, np.ndarray]]] = {}
                for m, vec in zip(chunk, vectors):
                    by_scope.setdefault(m.scope, []).append((m, vec))
                results.extend(await self._route_and_store(by_scope))
            done = min(start + INGEST_CHUNK, total)
            if progress is not None:
                maybe = progress(done, total)
                if inspect.isawaitable(maybe):
                    await maybe
        return results

    async def _new_only(self, messages: list[MemoryMessage]) -> list[MemoryMessage]:
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
                rows = await self.db.fetchall(
                    f"SELECT message_id FROM memory_messages WHERE scope=? AND channel=? AND message_id <> '' "
                    f"AND message_id IN ({','.join('?' * len(part))})", (scope, channel, *part))
                known |= {(scope, channel, r["message_id"]) for r in rows}
        for m in messages:
            key = (m.scope, m.channel, m.message_id)
            if not m.text.strip() or (m.message_id and (key in known or key in seen)):
                continue
            seen.add(key)
            kept.append(m)
        return kept

    async def _route_and_store(self, by_scope: dict[str, list[tuple[MemoryMessage, np.ndarray]]]
                               ) -> list[RouteResult]:
        """Route each scope's messages under its lock (each among the worlds of its channel's
        audience), then store them all in one transaction. Locks are taken in scope order, so
        two batches never wait on each other in a cycle."""
        scopes = sorted(by_scope)
        routed: dict[str, tuple[ScopeState, list[RouteResult], set[str], set[str]]] = {}
        moved_scopes: set[str] = set()
        async with contextlib.AsyncExitStack() as held:
            for scope in scopes:
                await held.enter_async_context(self._lock(scope))
            for scope in scopes:
                state = await self._scope(scope, locked=True)
                audiences, moved = await self._settle_audiences(scope, state, by_scope[scope])
                if moved:
                    moved_scopes.add(scope)
                results, born, touched = [], set(), set()
                for message, vec in by_scope[scope]:
                    channel = await self._channel(scope, message.channel)
                    result = self._route(state, channel, message, vec, audiences[message.channel])
                    results.append(result)
                    (born if result.action == "birth" else touched).add(result.world_id)
                routed[scope] = (state, results, born, touched - born)
            try:
                async with self.db.transaction() as conn:
                    for scope, (state, results, born, touched) in routed.items():
                        await self._persist(conn, scope, state, by_scope[scope], results, born, touched)
            except BaseException:
                for scope in scopes:
                    self._forget_state(scope)  # the database is the truth: reload it on next use
                raise
        for scope in sorted(moved_scopes):
            await self.refresh_topics(scope)
        out: list[RouteResult] = []
        for scope, (state, results, _, _) in routed.items():
            self._after_ingest(scope, state, by_scope[scope], results)
            out.extend(results)
        return out

    def _route(self, state: ScopeState, channel: ChannelState, message: MemoryMessage,
               vec: np.ndarray, audience: str) -> RouteResult:
        """Route among the worlds of ``audience`` only: audiences never share a world."""
        cfg = self.cfg
        index = state.index(audience)
        ts = _aware(message.ts)
        while channel.recent and (ts - channel.recent[0][0]).total_seconds() > cfg.context_window_s:
            channel.recent.popleft()
        context = [v for _, v in list(channel.recent)[-cfg.context_messages:]] if cfg.context_messages else []
        query = router.routing_vector(cfg, vec, context)
        candidates = [router.Candidate(wid, sim, state.worlds[wid].maturity)
                      for wid, sim in index.search(query, cfg.candidates)]
        chosen = router.choose(cfg, candidates)
        short = router.is_short(cfg, message.text)
        recent_world = (channel.world_id if channel.world_id in index and channel.last_ts is not None
                        and (ts - channel.last_ts).total_seconds() <= cfg.short_window_s else None)
        if chosen is not None:
            world = state.worlds[chosen.world_id]
            a = router.alpha(cfg, world.access_count, world.maturity)
            index.upsert(world.id, router.absorb(index.vector(world.id), vec, a))
            result = RouteResult(world.id, "absorb", chosen.similarity)
        elif short and recent_world is not None:
            # Little content of its own: it belongs to what the channel is talking about.
            world = state.worlds[recent_world]
            sim = next((c.similarity for c in candidates if c.world_id == world.id),
                       float(index.vector(world.id) @ query))
            result = RouteResult(world.id, "follow", sim)
        else:
            world = WorldState(new_world_id(), 0, audience=audience)
            while world.id in state.worlds:
                world.id = new_world_id()
            state.worlds[world.id] = world
            index.upsert(world.id, vec)
            result = RouteResult(world.id, "birth", 1.0)
        world.access_count += 1
        world.evidence += 1
        channel.world_id, channel.last_ts = world.id, ts
        if not short:
            channel.recent.append((ts, vec))
            while len(channel.recent) > max(cfg.context_messages, 1):
                channel.recent.popleft()
        return result

    async def _persist(self, conn, scope: str, state: ScopeState, items, results: list[RouteResult],
                       born: set[str], touched: set[str]) -> None:
        await self._write_worlds(conn, scope, state, items, results, born, touched)
        await conn.executemany(
            "INSERT INTO memory_messages(scope, world_id, channel, message_id, author, author_id, text, ts,"
            " embedding) VALUES (?,?,?,?,?,?,?,?,?)",
            [(scope, r.world_id, m.channel, m.message_id, m.author, m.author_id, m.text.strip(),
              iso(_aware(m.ts)), to_blob(v))
             for (m, v), r in zip(items, results)])

    async def _write_worlds(self, conn, scope: str, state: ScopeState, items, results: list[RouteResult],
                            born: set[str], touched: set[str]) -> None:
        """Insert the worlds routing gave birth to and save the centroids and counters it moved."""
        first_ts: dict[str, datetime] = {}
        last_ts: dict[str, datetime] = {}
        first_text: dict[str, str] = {}
        for (message, _), result in zip(items, results):
            ts = _aware(message.ts)
            first_ts.setdefault(result.world_id, ts)
            first_text.setdefault(result.world_id, message.text)
            last_ts[result.world_id] = max(last_ts.get(result.world_id, ts), ts)
        await conn.executemany(
            "INSERT INTO worlds(id, scope, audience, topic, centroid, access_count, created_at, last_active)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [(wid, scope, state.worlds[wid].audience, topics.initial_topic(first_text[wid]),
              to_blob(state.index_of(wid).vector(wid)), state.worlds[wid].access_count, iso(first_ts[wid]),
              iso(last_ts[wid])) for wid in born])
        await conn.executemany(
            "UPDATE worlds SET centroid=?, access_count=?, last_active=max(last_active, ?) WHERE id=?",
            [(to_blob(state.index_of(wid).vector(wid)), state.worlds[wid].access_count, iso(last_ts[wid]), wid)
             for wid in touched])

    def _after_ingest(self, scope: str, state: ScopeState, items, results: list[RouteResult]) -> None:
        if self.llm is not None:
            counts: dict[str, int] = {}
            for message, _ in items:
                counts[message.channel] = counts.get(message.channel, 0) + 1
            for channel, n in counts.items():
                self.extraction.note(scope, channel, n)
        for result in results:
            world = state.worlds.get(result.world_id)
            if world is not None and self._needs_topic(world):
                self._topic_dirty.setdefault(scope, set()).add(world.id)
        if self._topic_dirty.get(scope) and scope not in self._topic_tasks:
            self._topic_tasks[scope] = asyncio.get_running_loop().create_task(self._topics_later(scope))

    def _needs_topic(self, world: WorldState) -> bool:
        return world.evidence >= 3 and world.evidence >= world.topic_size * self.cfg.topic_refresh_growth

    def _forget_state(self, scope: str) -> None:
        self._scopes.pop(scope, None)
        for key in [k for k in self._channels if k[0] == scope]:
            del self._channels[key]

    # -- audiences ---------------------------------------------------------------------

    async def set_audiences(self, scope: str, audiences: dict[str, str]) -> list[str]:
        """Record who can read each channel (channel -> audience). A channel whose audience changed
        has its stored messages moved to the new audience's worlds, the beliefs resting on them
        following, and the worlds it left renamed; returns the channels that changed."""
        async with self._lock(scope):
            state = await self._scope(scope, locked=True)
            known = await audience_store.recorded(self.db, scope, list(audiences))
            changed = [ch for ch, audience in audiences.items() if known.get(ch) != audience]
            moved = [ch for ch in changed if await self._move_channel(scope, state, ch, audiences[ch])]
        if moved:
            await self.refresh_topics(scope)
        return changed

    async def audience_of(self, scope: str, channel: str) -> str:
        """Who can read ``channel``, as last recorded (a channel never recorded counts as public, so a
        post there shows only what every member can read)."""
        known = await audience_store.recorded(self.db, scope, [channel])
        return known.get(channel, PUBLIC)

    async def _settle_audiences(self, scope: str, state: ScopeState, items) -> tuple[dict[str, str], bool]:
        """channel -> the audience its messages are routed in, for the channels of ``items``: a
        message's own audience when it carries one (moving the channel first when that is new),
        else the channel's recorded audience. Also says whether any channel moved."""
        wanted: dict[str, str | None] = {}
        for message, _ in items:
            if wanted.get(message.channel) is None:
                wanted[message.channel] = message.audience
        known = await audience_store.recorded(self.db, scope, list(wanted))
        out, moved = {}, False
        for channel, audience in wanted.items():
            if audience is not None and known.get(channel) != audience:
                moved |= await self._move_channel(scope, state, channel, audience)
            out[channel] = known.get(channel, PUBLIC) if audience is None else audience
        return out, moved

    async def _move_channel(self, scope: str, state: ScopeState, channel: str, audience: str) -> bool:
        """Re-route a channel's stored messages, with their stored embeddings and in their order,
        among the worlds of ``audience``, and record the channel's new audience. The caller holds
        the scope's lock. True when messages moved."""
        rows = await self.db.fetchall(
            "SELECT m.id, m.world_id, m.message_id, m.author, m.text, m.ts, m.embedding FROM memory_messages m "
            "JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND m.channel=? AND w.audience<>? ORDER BY m.id",
            (scope, channel, audience))
        self._channels.pop((scope, channel), None)
        if not rows:
            async with self.db.transaction() as conn:
                await audience_store.record(conn, scope, channel, audience)
            return False
        fresh = ChannelState()
        items = [(MemoryMessage(scope, channel, r["message_id"], r["author"], r["text"], parse_ts(r["ts"]),
                                audience), from_blob(r["embedding"])) for r in rows]
        results = []
        for i, (message, vec) in enumerate(items):
            results.append(self._route(state, fresh, message, vec, audience))
            if i % MOVE_SLICE == MOVE_SLICE - 1:
                await asyncio.sleep(0)  # a long channel moves without stalling everything else
        born = {r.world_id for r in results if r.action == "birth"}
        touched = {r.world_id for r in results} - born
        left = {r["world_id"] for r in rows}
        try:
            async with self.db.transaction() as conn:
                await self._write_worlds(conn, scope, state, items, results, born, touched)
                await conn.executemany("UPDATE memory_messages SET world_id=? WHERE id=?",
                                       [(res.world_id, r["id"]) for r, res in zip(rows, results)])
                with_beliefs = await audience_store.move_beliefs(
                    conn, scope, {r["id"]: res.world_id for r, res in zip(rows, results)})
                recentred = {wid: await lifecycle.recentre(conn, wid) for wid in left}
                for wid in left:  # their names drew on what moved away: provisional ones until renamed
                    await audience_store.rename_provisionally(conn, wid)
                await audience_store.record(conn, scope, channel, audience)
        except BaseException:
            self._forget_state(scope)  # the database is the truth: reload it on next use
            raise
        for wid, found in recentred.items():
            if found is not None and wid in state.worlds:
                state.index_of(wid).upsert(wid, found[0])
                state.worlds[wid].access_count = state.worlds[wid].evidence = found[1]
        await self._remove_dead(scope)
        changed = (left | born | touched | with_beliefs) & set(state.worlds)
        await self._refresh_maturity(scope, sorted(changed))
        self._topic_dirty.setdefault(scope, set()).update(changed)
        log.info("memory: %d messages of %s/%s moved to audience %r", len(rows), scope, channel, audience)
        return True

    # -- queries -----------------------------------------------------------------------

    async def route_query(self, viewer: Viewer | str, text: str) -> tuple[WorldInfo | None, float]:
        """The world a question is about (the nearest centroid the viewer sees) and its similarity."""
        vec = (await self.embedder.embed([text]))[0]
        return await self._nearest(Viewer.of(viewer), vec)

    async def _nearest(self, viewer: Viewer, vec: np.ndarray) -> tuple[WorldInfo | None, float]:
        state = await self._scope(viewer.scope)
        found = max((hit for audience, index in state.indexes.items() if viewer.sees(audience)
                     for hit in index.search(vec, 1)), key=lambda hit: hit[1], default=None)
        if found is None:
            return None, 0.0
        infos = await self._infos(viewer, [found[0]])
        return (infos[0] if infos else None), found[1]

    async def recall(self, viewer: Viewer | str, query: str, k: int | None = None) -> RecallResult:
        """The world the query belongs to among those the viewer sees, its top beliefs and messages.
        A bare scope is its public viewer (engine.memory.audience)."""
        k = k or self.cfg.recall_k
        vec = (await self.embedder.embed([query]))[0]
        world, sim = await self._nearest(Viewer.of(viewer), vec)
        if world is None:
            return RecallResult(None, 0.0, [], [])
        found_beliefs = await recall_mod.rank_beliefs(self.db, world.id, vec, query, k)
        evidence = await recall_mod.rank_evidence(self.db, world.id, vec, query, k)
        return RecallResult(world, sim, found_beliefs, evidence)

    async def ask(self, viewer: Viewer | str, question: str) -> AskResult:
        """An answer grounded in the one world the question routes to; answer is None without an LLM."""
        viewer = Viewer.of(viewer)
        result = await self.recall(viewer, question, self.cfg.recall_k * 2)
        if self.llm is None or result.world is None:
            return AskResult(None, result)
        answer = await self.llm.chat(recall_mod.ask_prompt(question, result), job="memory.ask", scope=viewer.scope)
        return AskResult(answer.strip(), result)

    async def _infos(self, viewer: Viewer, world_ids: list[str] | None = None) -> list[WorldInfo]:
        sees, params = viewer.where("w.audience")
        where, params = f"w.scope=? AND {sees}", [viewer.scope, *params]
        if world_ids is not None:
            if not world_ids:
                return []
            where += f" AND w.id IN ({','.join('?' * len(world_ids))})"
            params += world_ids
        rows = await self.db.fetchall(
            "SELECT w.id, w.scope, w.audience, w.topic, w.access_count, w.created_at, w.last_active, "
            "(SELECT count(*) FROM memory_messages m WHERE m.world_id=w.id) AS evidence, "
            "(SELECT count(*) FROM beliefs b WHERE b.world_id=w.id AND b.invalid_at IS NULL) AS beliefs, "
            "(SELECT avg(confidence) FROM beliefs b WHERE b.world_id=w.id AND b.invalid_at IS NULL) AS conf "
            f"FROM worlds w WHERE {where} ORDER BY w.last_active DESC", params)
        return [WorldInfo(r["id"], r["scope"], r["topic"], maturity(r["conf"] or 0.0, r["beliefs"]),
                          r["access_count"], r["beliefs"], r["evidence"], parse_ts(r["created_at"]),
                          parse_ts(r["last_active"]), r["audience"]) for r in rows]

    async def worlds(self, viewer: Viewer | str) -> list[WorldInfo]:
        """Every world of the scope the viewer sees, most recently active first."""
        return await self._infos(Viewer.of(viewer))

    async def world(self, viewer: Viewer | str, name_or_id: str) -> tuple[WorldInfo, list[Belief]] | None:
        """A world the viewer sees, by id, id prefix or topic words, with all its beliefs (superseded ones
        too), newest first."""
        viewer = Viewer.of(viewer)
        sees, seen = viewer.where("audience")
        wanted = name_or_id.strip().lower()
        if not wanted:
            return None
        like = wanted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        found = None
        for sql, param in (("id=?", wanted),
                           ("id LIKE ? ESCAPE '\\'", like + "%" if len(wanted) >= 3 else None),
                           ("lower(topic)=?", wanted),
                           ("lower(topic) LIKE ? ESCAPE '\\'", f"%{like}%")):
            if param is None:
                continue
            found = await self.db.fetchval(
                f"SELECT id FROM worlds WHERE scope=? AND {sees} AND {sql} ORDER BY access_count DESC LIMIT 1",
                (viewer.scope, *seen, param))
            if found:
                break
        infos = await self._infos(viewer, [found]) if found else []
        if not infos:
            return None
        match = infos[0]
        rows = await self.db.fetchall(
            f"SELECT {BELIEF_COLUMNS} FROM beliefs WHERE world_id=? AND scope=? ORDER BY learned_at DESC, id DESC",
            (match.id, viewer.scope))
        return match, [belief_from_row(r) for r in rows]

    async def messages_of(self, scope: str) -> dict[str, list[str]]:
        """world id -> platform ids of the messages it holds, in order (for exports)."""
        rows = await self.db.fetchall(
            "SELECT world_id, message_id FROM memory_messages WHERE scope=? ORDER BY id", (scope,))
        out: dict[str, list[str]] = {}
        for r in rows:
            out.setdefault(r["world_id"], []).append(r["message_id"])
        return out

    async def digest(self, viewer: Viewer | str, since: datetime | str) -> dict:
        """What changed since ``since`` in the worlds the viewer sees: new and grown worlds, new and
        superseded beliefs, merges, as lists of plain dicts (every item names its world's ``topic``)."""
        viewer = Viewer.of(viewer)
        scope = viewer.scope
        since_dt = _aware(parse_ts(since) if isinstance(since, str) else since)
        since_s = iso(since_dt)
        infos = {w.id: w for w in await self._infos(viewer)}
        grown = await self.db.fetchall(
            "SELECT world_id, count(*) AS n FROM memory_messages WHERE scope=? AND ts>=? GROUP BY world_id "
            "ORDER BY n DESC", (scope, since_s))
        new_worlds, grown_worlds = [], []
        for r in grown:
            w = infos.get(r["world_id"])
            if w is None:
                continue
            entry = {"topic": w.topic, "id": w.id, "added": r["n"], "messages": w.evidence,
                     "beliefs": w.beliefs, "maturity": round(w.maturity, 3)}
            (new_worlds if w.created_at >= since_dt else grown_worlds).append(entry)
        new_beliefs = [
            {"text": f"{r['subject']} {r['predicate']} {r['object']}", "topic": infos[r["world_id"]].topic,
             "confidence": round(r["confidence"], 2), "id": r["id"], "world_id": r["world_id"]}
            for r in await self.db.fetchall(
                "SELECT id, world_id, subject, predicate, object, confidence FROM beliefs WHERE scope=? "
                "AND learned_at>=? AND invalid_at IS NULL ORDER BY learned_at", (scope, since_s))
            if r["world_id"] in infos]
        superseded = [
            {"old": f"{r['os']} {r['op']} {r['oo']}", "new": f"{r['ns']} {r['np']} {r['no']}",
             "topic": infos[r["world_id"]].topic, "world_id": r["world_id"], "invalid_at": r["invalid_at"]}
            for r in await self.db.fetchall(
                "SELECT o.world_id, n.world_id AS new_world, o.subject AS os, o.predicate AS op, o.object AS oo, "
                "o.invalid_at, n.subject AS ns, n.predicate AS np, n.object AS no FROM beliefs o JOIN beliefs n "
                "ON n.id = o.superseded_by WHERE o.scope=? AND n.learned_at>=? ORDER BY n.learned_at",
                (scope, since_s))
            if r["world_id"] in infos and r["new_world"] in infos]
        merge_sees, merge_seen = viewer.where("audience")
        merges = [
            {"absorbed_topic": r["absorbed_topic"], "kept_id": r["kept_id"],
             "kept_topic": infos[r["kept_id"]].topic if r["kept_id"] in infos else "",
             "absorbed_id": r["absorbed_id"], "similarity": round(r["similarity"], 3)}
            for r in await self.db.fetchall(
                "SELECT kept_id, absorbed_id, absorbed_topic, similarity FROM world_merges "
                f"WHERE scope=? AND {merge_sees} AND merged_at>=? ORDER BY merged_at", (scope, *merge_seen, since_s))]
        return {"new_worlds": new_worlds, "grown_worlds": grown_worlds, "new_beliefs": new_beliefs,
                "superseded_beliefs": superseded, "merges": merges}

    # -- forgetting and maintenance ----------------------------------------------------

    async def forget(self, scope: str, channel: str | None = None) -> dict[str, int]:
        """Forget one channel of a scope (its messages, the beliefs resting only on them, the worlds
        left empty), or the whole scope when ``channel`` is None."""
        async with self._lock(scope):
            if channel is None:
                async with self.db.transaction() as conn:
                    counts = {}
                    for table in ("memory_messages", "beliefs", "worlds"):
                        async with conn.execute(f"SELECT count(*) FROM {table} WHERE scope=?", (scope,)) as cur:
                            counts[table] = (await cur.fetchone())[0]
                    await conn.execute("DELETE FROM worlds WHERE scope=?", (scope,))
                    await conn.execute("DELETE FROM world_merges WHERE scope=?", (scope,))
                self._forget_state(scope)
                return {"messages": counts["memory_messages"], "beliefs": counts["beliefs"],
                        "worlds": counts["worlds"]}
            counts = await self._forget_where(scope, "channel=?", (channel,))
            self._channels.pop((scope, channel), None)
            return counts

    async def forget_author(self, scope: str, author_id: str) -> dict[str, int]:
        """Forget one person's messages in a scope, the beliefs resting only on them and the
        worlds left empty; other people's messages stay."""
        if not author_id:
            raise ValueError("forget_author needs an author id")
        async with self._lock(scope):
            counts = await self._forget_where(scope, "author_id=?", (author_id,))
            for key in [k for k in self._channels if k[0] == scope]:
                del self._channels[key]  # their recent messages may be in any channel's context
            return counts

    async def _forget_where(self, scope: str, where: str, args: tuple) -> dict[str, int]:
        state = await self._scope(scope, locked=True)
        async with self.db.transaction() as conn:
            messages, beliefs, touched = await lifecycle.forget_messages(conn, scope, where, args)
            recentred = {wid: await lifecycle.recentre(conn, wid) for wid in touched}
        for wid, found in recentred.items():
            if found is not None and wid in state.worlds:
                state.index_of(wid).upsert(wid, found[0])
                state.worlds[wid].access_count = state.worlds[wid].evidence = found[1]
        removed = await self._remove_dead(scope)
        await self._refresh_maturity(scope, [w for w in touched if w in state.worlds])
        return {"messages": messages, "beliefs": beliefs, "worlds": removed}

    async def _remove_dead(self, scope: str | None) -> int:
        dead = await lifecycle.remove_dead(self.db, scope)
        for s, wid in dead:
            state = self._scopes.get(s)
            if state is not None and wid in state.worlds:
                state.index_of(wid).remove(wid)
                del state.worlds[wid]
        return len(dead)

    async def merge(self, scope: str) -> list[dict]:
        """Merge every pair of worlds above the merge threshold until none is left; worlds merge only
        within their audience."""
        merged = []
        async with self._lock(scope):
            state = await self._scope(scope, locked=True)
            for index in list(state.indexes.values()):
                merged += await self._merge_within(scope, state, index)
        return merged

    async def _merge_within(self, scope: str, state: ScopeState, index: CentroidIndex) -> list[dict]:
        merged = []
        while True:
            pairs = await run_cpu(lifecycle.merge_pairs, index, self.cfg.merge_threshold)
            if not pairs:
                break
            for a, b, sim in pairs:
                wa, wb = state.worlds[a], state.worlds[b]
                keep, gone = (wa, wb) if (wa.access_count, wb.id) >= (wb.access_count, wa.id) else (wb, wa)
                centroid = router.normalise(index.vector(keep.id) * keep.access_count
                                            + index.vector(gone.id) * gone.access_count)
                await lifecycle.merge_worlds(self.db, scope, keep, gone, centroid, sim)
                index.upsert(keep.id, centroid)
                index.remove(gone.id)
                del state.worlds[gone.id]
                keep.access_count += gone.access_count
                keep.evidence += gone.evidence
                for ch in self._channels.values():
                    if ch.world_id == gone.id:
                        ch.world_id = keep.id
                self._topic_dirty.setdefault(scope, set()).add(keep.id)
                await self._refresh_maturity(scope, [keep.id])
                merged.append({"kept": keep.id, "absorbed": gone.id, "similarity": round(sim, 4)})
        return merged

    async def maintain(self, scope: str | None = None) -> dict[str, int]:
        """Daily upkeep: decay belief confidence, merge near-duplicate worlds, remove dead ones,
        rename worlds that grew. ``scope`` None: every scope."""
        scopes = [scope] if scope else [r["scope"] for r in await self.db.fetchall("SELECT DISTINCT scope FROM worlds")]
        now = utcnow()
        totals = {"decayed": 0, "merged": 0, "removed": 0, "renamed": 0}
        for s in scopes:
            async with self.db.transaction() as conn:
                totals["decayed"] += await belief_store.decay(conn, s, now, self.cfg.half_life_days)
            state = await self._scope(s)
            await self._refresh_maturity(s, list(state.worlds))
            totals["merged"] += len(await self.merge(s))
            async with self._lock(s):
                totals["removed"] += await self._remove_dead(s)
            totals["renamed"] += await self.refresh_topics(s)
        return totals

    # -- topics ------------------------------------------------------------------------

    async def _topics_later(self, scope: str) -> None:
        try:
            await asyncio.sleep(self.cfg.topic_delay_s)
            await self.refresh_topics(scope)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("topic refresh failed for %s", scope)
        finally:
            self._topic_tasks.pop(scope, None)

    async def refresh_topics(self, scope: str, every: bool = False) -> int:
        """Rename the worlds that grew since they were named (all of them with ``every``)."""
        state = await self._scope(scope)
        targets = set(state.worlds) if every else self._topic_dirty.pop(scope, set()) & set(state.worlds)
        if not targets:
            return 0
        docs: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for audience in sorted({state.worlds[w].audience for w in targets}):
            # Contrast with the largest worlds of the same audience (all of them in small scopes):
            # a name draws on nothing its audience cannot read.
            group = {w for w in targets if state.worlds[w].audience == audience}
            peers = [w for w in state.worlds if state.worlds[w].audience == audience]
            contrast = sorted(peers, key=lambda w: -state.worlds[w].evidence)[:TOPIC_CONTRAST]
            group_docs = await self._topic_docs(sorted(group | set(contrast)))
            names.update(await run_cpu(topics.keyword_topics, group_docs, group, self.cfg.topic_keywords))
            docs.update(group_docs)
        if self.llm is not None:
            for wid in sorted(targets, key=lambda w: -state.worlds[w].evidence)[:TOPIC_LLM_PER_PASS]:
                facts = [f"{r['subject']} {r['predicate']} {r['object']}" for r in await self.db.fetchall(
                    "SELECT subject, predicate, object FROM beliefs WHERE world_id=? AND invalid_at IS NULL "
                    "ORDER BY confidence DESC LIMIT 10", (wid,))]
                try:
                    named = await self.llm.structured(
                        topics.TopicName, topics.topic_prompt(names.get(wid, ""), docs.get(wid, []), facts),
                        fast=True, job="memory.topic", scope=scope)
                    if named.name.strip():
                        names[wid] = named.name.strip()[:80]
                except Exception:
                    log.warning("LLM topic name failed for world %s; keeping keywords", wid, exc_info=True)
        sizes = {wid: state.worlds[wid].evidence for wid in targets}
        async with self.db.transaction() as conn:
            await conn.executemany("UPDATE worlds SET topic=?, topic_size=? WHERE id=? AND scope=?",
                                   [(name, sizes[wid], wid, scope) for wid, name in names.items()])
        for wid in names:
            if wid in state.worlds:
                state.worlds[wid].topic_size = sizes[wid]
        return len(names)

    async def _topic_docs(self, world_ids: list[str]) -> dict[str, list[str]]:
        """world id -> the texts of its newest messages (at most TOPIC_SAMPLE)."""
        docs: dict[str, list[str]] = {}
        for i in range(0, len(world_ids), 500):
            part = world_ids[i:i + 500]
            rows = await self.db.fetchall(
                "SELECT world_id, text FROM (SELECT world_id, text, row_number() OVER "
                "(PARTITION BY world_id ORDER BY id DESC) AS rn FROM memory_messages "
                f"WHERE world_id IN ({','.join('?' * len(part))})) WHERE rn<=?", (*part, TOPIC_SAMPLE))
            for r in rows:
                docs.setdefault(r["world_id"], []).append(r["text"])
        return docs

    # -- belief extraction -------------------------------------------------------------

    async def flush(self) -> None:
        """Run all pending belief extraction and topic naming now, and wait for it."""
        await self.extraction.drain()
        if self.llm is not None:
            for row in await self.db.fetchall(
                    "SELECT DISTINCT scope, channel FROM memory_messages WHERE extracted=0"):
                await self._extract_channel(row["scope"], row["channel"])
        for task in list(self._topic_tasks.values()):
            task.cancel()
        for scope in list(self._topic_dirty):
            await self.refresh_topics(scope)

    async def _extract_channel(self, scope: str, channel: str) -> None:
        """Extract beliefs from the channel's unread messages, a batch at a time."""
        if self.llm is None:
            return
        while True:
            rows = await self.db.fetchall(
                "SELECT m.id, m.world_id, m.author, m.text, m.ts, w.topic FROM memory_messages m "
                "JOIN worlds w ON w.id = m.world_id WHERE m.scope=? AND m.channel=? AND m.extracted=0 "
                "ORDER BY m.id LIMIT ?", (scope, channel, self.cfg.extract_batch_max))
            if not rows:
                return
            groups: dict[str, list] = {}
            for r in rows:
                groups.setdefault(r["world_id"], []).append(r)
            found: list[NewBelief] = []
            for group in groups.values():
                numbered = [(i + 1, r["author"], r["text"]) for i, r in enumerate(group)]
                try:
                    out = await self.llm.structured(Extraction, extraction_prompt(numbered, group[0]["topic"]),
                                                    fast=True, job="memory.extract", scope=scope)
                except InvalidAnswer as err:
                    # Never in shape, even after the client's retries: skip these messages rather than
                    # retry them forever. Other LLM errors (endpoint down, budget) leave them pending.
                    log.warning("no beliefs from %d messages of %s/%s: %s", len(group), scope, channel, err)
                    continue
                for b in out.beliefs:
                    sources = [group[n - 1] for n in b.sources if 1 <= n <= len(group)] or group
                    found.append(NewBelief(b.subject, b.predicate, b.object, b.confidence, b.exclusive,
                                           [s["id"] for s in sources],
                                           max(parse_ts(s["ts"]) for s in sources)))
            vectors = await self.embedder.embed([b.text() for b in found]) if found else []
            touched = await self._store_beliefs(scope, found, vectors, [r["id"] for r in rows])
            await self._refresh_maturity(scope, touched)

    async def _store_beliefs(self, scope: str, found: list[NewBelief], vectors, read_ids: list[int]) -> list[str]:
        now = utcnow()
        touched: set[str] = set()
        async with self._lock(scope):
            async with self.db.transaction() as conn:
                for belief, vec in zip(found, vectors):
                    # The world that holds the source now (a merge may have moved it meanwhile).
                    async with conn.execute("SELECT world_id FROM memory_messages WHERE id=? AND scope=?",
                                            (belief.sources[0], scope)) as cur:
                        row = await cur.fetchone()
                    if row is None:  # forgotten meanwhile
                        continue
                    await belief_store.apply(conn, scope, row["world_id"], [belief], np.asarray([vec]), now)
                    touched.add(row["world_id"])
                for i in range(0, len(read_ids), 500):
                    part = read_ids[i:i + 500]
                    await conn.execute(f"UPDATE memory_messages SET extracted=1 WHERE id IN ({','.join('?' * len(part))})",
                                       part)
        return sorted(touched)
