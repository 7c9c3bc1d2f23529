"""MemoryEngine: the WorldNodes memory of every chat scope, behind one facade.

State per scope lives in the database (worlds, messages, beliefs, merges) and, for routing
speed, in memory (engine.memory.scope_cache: an hnswlib index of centroids, counters and
maturity per world, the recent messages of each channel), rebuilt from the database whenever a
scope is first used or another process changed it, so a restart loses nothing. Writes to a scope
happen under that scope's lock; every query names its scope, so nothing crosses scopes.

Inside a scope, memory is partitioned by audience (engine.memory.audience): each audience has
its own worlds and its own centroid index, a message is routed only among its channel's
audience's worlds, and every query takes a Viewer and sees only the audiences it may.

The facade orders the work and owns the scheduling (scope locks, background topic naming,
belief extraction); the work itself is done by free functions that take their dependencies:
routing (router), writes, audience moves and forgetting (storage), merges (lifecycle), topic
names (topics), retrieval (retrieval, over the message_index; the /ask prompt in recall), the digest
(digest).
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from datetime import datetime
from typing import Any, Callable

import numpy as np

from engine.config import MemorySection
from engine.db import Database
from engine.embedder import Embedder
from engine.memory import audience as audience_store
from engine.memory import beliefs as belief_store
from engine.memory import digest as digest_mod
from engine.memory import chattext, extraction, lifecycle, recall as recall_mod, retrieval, router, storage, topics
from engine.memory.audience import PUBLIC, Viewer
from engine.memory.extraction import ExtractionScheduler
from engine.memory.message_index import MessageIndex
from engine.memory.models import (AskResult, Belief, Evidence, MemoryMessage, RecallResult, RouteResult, WorldInfo, aware,
                                  parse_ts, utcnow)
from engine.memory.scope_cache import ScopeCache, ScopeState
from engine.memory.sim_scopes import is_sim_scope

log = logging.getLogger(__name__)

INGEST_CHUNK = 256


class MemoryEngine:
    max_query_chars = retrieval.MAX_QUERY_CHARS   # longer search input is refused by the commands, cut here

    def __init__(self, db: Database, embedder: Embedder, config: MemorySection, llm: Any = None):
        self.db = db
        self.embedder = embedder
        self.cfg = config
        self.llm = llm            # engine.llm.client.LLMClient or None
        self.cache = ScopeCache(db, embedder, config)
        self.messages = MessageIndex(config.recall_exact_max)   # message and belief vectors recall searches
        self._topic_dirty: dict[str, set[str]] = {}   # scope -> worlds to rename
        self._topic_tasks: dict[str, asyncio.Task] = {}
        self.extraction = ExtractionScheduler(self._extract_channel, config.extract_every_n,
                                              config.extract_every_s)

    # -- start-up and state ------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Fit messages stored before chattext search, remove dead worlds, rebuild every scope's index,
        queue unfinished extraction."""
        await chattext.fit_stored(self.db, self.cfg.timezone)
        dead = await lifecycle.remove_dead(self.db)
        scopes = [r["scope"] for r in await self.db.fetchall("SELECT DISTINCT scope FROM worlds")]
        for scope in scopes:
            await self._scope(scope)
        if self.llm is not None:
            for row in await self.db.fetchall(
                    "SELECT scope, channel, count(*) AS n FROM memory_messages WHERE extracted=0 "
                    "GROUP BY scope, channel"):
                if self.llm_for(row["scope"]) is not None:
                    self.extraction.note(row["scope"], row["channel"], row["n"])
        return {"scopes": len(scopes), "removed": len(dead)}

    async def close(self) -> None:
        await self.extraction.close()
        await self.messages.close()
        for task in self._topic_tasks.values():
            task.cancel()
        if self._topic_tasks:
            await asyncio.gather(*self._topic_tasks.values(), return_exceptions=True)

    def llm_for(self, scope: str) -> Any:
        """The LLM that extracts beliefs and names worlds in ``scope``: none for a simulation's
        scope (engine.memory.sim_scopes)."""
        return None if is_sim_scope(scope) else self.llm

    def _lock(self, scope: str) -> asyncio.Lock:
        return self.cache.lock(scope)

    async def _scope(self, scope: str, locked: bool = False) -> ScopeState:
        return await self.cache.scope(scope, locked)

    async def _refresh_maturity(self, scope: str, world_ids: list[str]) -> None:
        await self.cache.refresh_maturity(scope, world_ids)

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
            chunk = await storage.unseen(self.db, messages[start:start + INGEST_CHUNK])
            if chunk:
                vectors = await self.embedder.embed([m.text.strip() for m in chunk])
                by_scope: dict[str, storage.Routed] = {}
                for m, vec in zip(chunk, vectors):
                    by_scope.setdefault(m.scope, []).append((m, vec))
                results.extend(await self._route_and_store(by_scope))
            done = min(start + INGEST_CHUNK, total)
            if progress is not None:
                maybe = progress(done, total)
                if inspect.isawaitable(maybe):
                    await maybe
        return results

    async def _route_and_store(self, by_scope: dict[str, storage.Routed]) -> list[RouteResult]:
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
                audiences, moved = await storage.settle_audiences(self.db, self.cfg, self.cache, scope, state,
                                                                  by_scope[scope])
                if moved:
                    self._mark_topics(scope, moved)
                    moved_scopes.add(scope)
                    self.messages.invalidate(scope)
                results, born, touched = [], set(), set()
                for message, vec in by_scope[scope]:
                    channel = await self.cache.channel(scope, message.channel)
                    result = router.route(self.cfg, state, channel, message, vec, audiences[message.channel])
                    results.append(result)
                    (born if result.action == "birth" else touched).add(result.world_id)
                routed[scope] = (state, results, born, touched - born)
            try:
                async with self.db.transaction() as conn:
                    for scope, (state, results, born, touched) in routed.items():
                        await storage.persist(conn, scope, state, by_scope[scope], results, born, touched,
                                              self.cfg.timezone)
            except BaseException:
                for scope in scopes:
                    self.cache.forget(scope)  # the database is the truth: reload it on next use
                raise
        for scope in sorted(moved_scopes):
            await self.refresh_topics(scope)
        out: list[RouteResult] = []
        for scope, (state, results, _, _) in routed.items():
            self._after_ingest(scope, state, by_scope[scope], results)
            out.extend(results)
        return out

    def _after_ingest(self, scope: str, state: ScopeState, items: storage.Routed,
                      results: list[RouteResult]) -> None:
        if self.llm_for(scope) is not None:
            counts: dict[str, int] = {}
            for message, _ in items:
                counts[message.channel] = counts.get(message.channel, 0) + 1
            for channel, n in counts.items():
                self.extraction.note(scope, channel, n)
        self._mark_topics(scope, {r.world_id for r in results if r.world_id in state.worlds
                                   and topics.needs_topic(self.cfg, state.worlds[r.world_id])})
        if self._topic_dirty.get(scope) and scope not in self._topic_tasks:
            task = asyncio.get_running_loop().create_task(
                topics.rename_later(self.cfg.topic_delay_s, lambda: self.refresh_topics(scope), scope))
            self._topic_tasks[scope] = task
            task.add_done_callback(lambda done: self._topic_tasks.pop(scope, None)
                                   if self._topic_tasks.get(scope) is done else None)

    def _mark_topics(self, scope: str, world_ids: set[str]) -> None:
        """Mark worlds for the next topic refresh of their scope."""
        if world_ids:
            self._topic_dirty.setdefault(scope, set()).update(world_ids)

    # -- audiences ---------------------------------------------------------------------

    async def set_audiences(self, scope: str, audiences: dict[str, str]) -> list[str]:
        """Record who can read each channel (channel -> audience). A channel whose audience changed
        has its stored messages moved to the new audience's worlds, the beliefs resting on them
        following, and the worlds it left renamed; returns the channels that changed."""
        async with self._lock(scope):
            state = await self._scope(scope, locked=True)
            changed, moved = await storage.set_audiences(self.db, self.cfg, self.cache, scope, state, audiences)
        if moved:
            self.messages.invalidate(scope)
            self._mark_topics(scope, moved)
            await self.refresh_topics(scope)
        return changed

    async def audience_of(self, scope: str, channel: str) -> str:
        """Who can read ``channel``, as last recorded (a channel never recorded counts as public, so a
        post there shows only what every member can read)."""
        known = await audience_store.recorded(self.db, scope, [channel])
        return known.get(channel, PUBLIC)

    # -- queries -----------------------------------------------------------------------

    async def route_query(self, viewer: Viewer | str, text: str) -> tuple[WorldInfo | None, float]:
        """The world a question is about (the nearest centroid the viewer sees) and its similarity."""
        vec = (await self.embedder.embed([retrieval.cap(text)]))[0]
        return await self._nearest(Viewer.of(viewer), vec)

    async def _nearest(self, viewer: Viewer, vec: np.ndarray) -> tuple[WorldInfo | None, float]:
        state = await self._scope(viewer.scope)
        near = await retrieval.nearest_worlds(state.indexes, viewer, vec, 1)
        if not near:
            return None, 0.0
        infos = await retrieval.world_infos(self.db, viewer, [near[0][0]])
        return (infos[0] if infos else None), near[0][1]

    async def recall(self, viewer: Viewer | str, query: str, k: int | None = None) -> RecallResult:
        """The best messages (neighbour turns counted in ``k``) and beliefs of every world the viewer
        sees, each with its world (engine.memory.retrieval). A bare scope is its public viewer."""
        viewer = Viewer.of(viewer)
        state = await self._scope(viewer.scope)
        return await retrieval.recall(self.db, self.embedder, self.messages, state.indexes, viewer, query,
                                      k or self.cfg.recall_k, retrieval.Tuning.of(self.cfg))

    async def ask(self, viewer: Viewer | str, question: str) -> AskResult:
        """An answer grounded in what recall finds across worlds; answer is None without an LLM, and
        no LLM call is made when memory holds nothing about the question."""
        viewer = Viewer.of(viewer)
        result = await self.recall(viewer, question, self.cfg.recall_k * 2)
        if self.llm is None or not result.found:
            return AskResult(None, result)
        answer = await self.llm.chat(recall_mod.ask_prompt(question, result), job="memory.ask", scope=viewer.scope)
        return AskResult(answer.strip(), result)

    async def worlds(self, viewer: Viewer | str) -> list[WorldInfo]:
        """Every world of the scope the viewer sees, most recently active first."""
        return await retrieval.world_infos(self.db, Viewer.of(viewer))

    async def world(self, viewer: Viewer | str, name_or_id: str) -> tuple[WorldInfo, list[Belief]] | None:
        """A world the viewer sees, by id, id prefix or topic words, with all its beliefs (superseded ones
        too), newest first."""
        viewer = Viewer.of(viewer)
        match = await retrieval.find_world(self.db, viewer, name_or_id)
        if match is None:
            return None
        return match, await retrieval.world_beliefs(self.db, viewer, match.id)

    async def recent_messages(self, viewer: Viewer | str, world_id: str) -> list[Evidence]:
        """A world's newest messages that the viewer sees, newest first."""
        return await retrieval.recent_messages(self.db, Viewer.of(viewer), world_id)

    async def messages_of(self, scope: str) -> dict[str, list[str]]:
        """world id -> platform ids of the messages it holds, in order (for exports)."""
        rows = await self.db.fetchall(
            "SELECT world_id, message_id FROM memory_messages WHERE scope=? ORDER BY id", (scope,))
        out: dict[str, list[str]] = {}
        for r in rows:
            out.setdefault(r["world_id"], []).append(r["message_id"])
        return out

    async def digest(self, viewer: Viewer | str, since: datetime | str) -> digest_mod.Digest:
        """What changed since ``since`` in the worlds the viewer sees: new and grown worlds, new and
        superseded beliefs, merges (engine.memory.digest; every entry names its world's topic)."""
        viewer = Viewer.of(viewer)
        visible = {w.id: w for w in await retrieval.world_infos(self.db, viewer)}
        return await digest_mod.digest(self.db, viewer, visible, aware(parse_ts(since) if isinstance(since, str)
                                                                       else since))

    # -- forgetting and maintenance ----------------------------------------------------

    async def forget(self, scope: str, channel: str | None = None) -> dict[str, int]:
        """Forget one channel of a scope (its messages, the beliefs resting only on them, the worlds
        left empty), or the whole scope when ``channel`` is None."""
        async with self._lock(scope):
            if channel is None:
                counts = await storage.forget_scope(self.db, self.cache, scope)
            else:
                counts = await storage.forget_where(self.db, self.cache, scope, "channel=?", (channel,))
                self.cache.forget_channel(scope, channel)
            self.messages.invalidate(scope)
            return counts

    async def forget_author(self, scope: str, author_id: str) -> dict[str, int]:
        """Forget one person's messages in a scope, the beliefs resting only on them and the
        worlds left empty; other people's messages stay."""
        if not author_id:
            raise ValueError("forget_author needs an author id")
        async with self._lock(scope):
            counts = await storage.forget_where(self.db, self.cache, scope, "author_id=?", (author_id,))
            self.messages.invalidate(scope)
            self.cache.forget_channels(scope)  # their recent messages may be in any channel's context
            return counts

    async def merge(self, scope: str) -> list[dict]:
        """Merge every pair of worlds above the merge threshold until none is left; worlds merge only
        within their audience."""
        async with self._lock(scope):
            state = await self._scope(scope, locked=True)
            merged = await lifecycle.merge_scope(self.db, self.cache, scope, state, self.cfg.merge_threshold)
        self._mark_topics(scope, {m["kept"] for m in merged})
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
                totals["removed"] += await storage.remove_dead(self.db, self.cache, s)
            totals["renamed"] += await self.refresh_topics(s)
        return totals

    # -- topics ------------------------------------------------------------------------

    async def refresh_topics(self, scope: str, every: bool = False) -> int:
        """Rename the worlds that grew since they were named (all of them with ``every``)."""
        state = await self._scope(scope)
        targets = set(state.worlds) if every else self._topic_dirty.pop(scope, set()) & set(state.worlds)
        if not targets:
            return 0
        return await topics.name_worlds(self.db, self.llm_for(scope), self.cfg, scope, state, targets)

    # -- belief extraction (engine.memory.extraction) ----------------------------------

    async def flush(self) -> None:
        """Run all pending belief extraction and topic naming now, and wait for it."""
        await self.extraction.drain()
        if self.llm is not None:
            for scope, channel in await extraction.unread_channels(self.db):
                while await self._extract_channel(scope, channel):
                    pass
        for task in list(self._topic_tasks.values()):
            task.cancel()
        for scope in list(self._topic_dirty):
            await self.refresh_topics(scope)

    async def _extract_channel(self, scope: str, channel: str) -> int:
        """Extract beliefs from the channel's next batch of unread messages (one LLM call); returns how
        many messages are still unread after it."""
        if self.llm_for(scope) is None:
            return 0
        touched = await extraction.extract_next_batch(self.db, self.llm, self.embedder, self._lock(scope), scope,
                                                      channel, self.cfg.extract_batch_max)
        if touched is None:
            return 0
        await self._refresh_maturity(scope, touched)
        return await extraction.unread_count(self.db, scope, channel)
