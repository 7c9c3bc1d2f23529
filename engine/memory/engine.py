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
routing (router), writes, audience moves and forgetting (storage), merges, decay and archiving
(lifecycle), topic names (topics), retrieval (retrieval, over the message_index; the /ask prompt in
recall), the digest (digest), what one member controls (members: opt-outs, /me, exports) and the
channel catch-up (catchup).

Every message reaches storage through ``ingest_many``, which first leaves out the messages of
members who opted out of memory in their scope (members.withhold). Everything forgotten, a
channel, a scope, a person, some messages or one belief, goes through one path
(storage.forget_where) and leaves every index: the keyword index with its rows (SQLite's
full-text segments merged), the message vectors (exact and hnswlib) rebuilt from the database,
worlds recentred or removed; the worlds that lost something are named provisionally after what
they still hold (then properly, in the background) and the merge history drops absorbed names;
then the ``on_forget`` listeners are told the ids that went, so copies kept outside memory go too
(the lines of a simulation's brief taken from memory: ``snapshot``).
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from datetime import datetime
from typing import Any, Awaitable, Callable

import numpy as np

from engine import vector_model
from engine.config import MemorySection
from engine.db import Database
from engine.embedder import Embedder
from engine.memory import (
    audience as audience_store,
    beliefs as belief_store,
    catchup as catchup_mod,
    chattext,
    digest as digest_mod,
    extraction,
    languages,
    lifecycle,
    members,
    recall as recall_mod,
    records,
    retrieval,
    router,
    snapshot as snapshot_mod,
    storage,
    topics,
)
from engine.memory.audience import PUBLIC, Viewer
from engine.memory.extraction import ExtractionScheduler
from engine.memory.message_index import MessageIndex
from engine.memory.models import (
    AskResult,
    Belief,
    Evidence,
    Forgotten,
    MemoryMessage,
    RecallResult,
    RouteResult,
    WorldInfo,
    aware,
    parse_ts,
    utcnow,
)
from engine.memory.pending import PendingWorker
from engine.memory.scope_cache import ScopeCache, ScopeState
from engine.memory.sim_scopes import is_sim_scope
from engine.offload import run_cpu
from engine.owners import ProcessOwner
from engine.words import plural

log = logging.getLogger(__name__)

INGEST_CHUNK = 256


class MemoryEngine:
    max_query_chars = retrieval.MAX_QUERY_CHARS   # longer search input is refused by the commands, cut here

    def __init__(self, db: Database, embedder: Embedder, config: MemorySection, llm: Any = None,
                 owner: ProcessOwner | None = None):
        self.db = db
        # this process, as the one that claims pending messages to embed (engine.memory.pending)
        self.owner = owner or ProcessOwner(db)
        self.embedder = embedder
        self.cfg = config
        self.llm = llm            # engine.llm.client.LLMClient or None
        self.cache = ScopeCache(db, embedder, config)
        self.messages = MessageIndex(config.recall_exact_max)   # message and belief vectors recall searches
        self._topic_dirty: dict[str, set[str]] = {}   # scope -> worlds to rename
        self._topic_tasks: dict[str, asyncio.Task] = {}
        self.extraction = ExtractionScheduler(self._extract_channel, config.extract_every_n,
                                              config.extract_every_s)
        self.pending = PendingWorker(db, self.owner, self._route_pending, config.ingest_batch_max)
        # told after every act of forgetting, with what went (engine.memory.models.Forgotten)
        self.on_forget: list[Callable[[Forgotten], Awaitable[None]]] = []

    # -- start-up and state ------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Refuse vectors of another embedding model (engine.vector_model), fit messages stored before
        chattext search, remove dead worlds, rebuild every scope's index, queue unfinished extraction,
        start embedding the stored messages that wait for it (those left by a restart too)."""
        await vector_model.check(self.db, self.embedder.model_name, lambda: run_cpu(lambda: self.embedder.dim))
        await chattext.fit_stored(self.db, self.cfg.timezone)
        dead = await lifecycle.remove_dead(self.db)
        scopes = await records.scopes(self.db)
        for scope in scopes:
            await self._scope(scope)
        if self.llm is not None:
            for scope, channel, n in await records.unextracted(self.db):
                if self.llm_for(scope) is not None:
                    self.extraction.note(scope, channel, n)
        self.pending.start()
        return {"scopes": len(scopes), "removed": len(dead)}

    async def close(self) -> None:
        """Stop. Belief extraction under way is cancelled, not finished: its messages stay unread
        and are extracted after the next start (``flush`` first to finish it now). Stored messages
        not yet embedded are embedded for up to ``close_embed_s`` first; those left, after the next start."""
        await self.pending.close(self.cfg.close_embed_s)
        await self.extraction.close()
        if self.llm is not None and (left := await records.unread_count(self.db)):
            log.info("%s wait for belief extraction; it runs after the next start",
                     plural(left, "{n} message", "{n} messages"))
        await self.messages.close()
        await self._stop_renaming()

    def llm_for(self, scope: str) -> Any:
        """The LLM that extracts beliefs and names worlds in ``scope``: none for a simulation's
        scope (engine.memory.sim_scopes) or where nothing may be spent (a stranger's direct message,
        engine.trust)."""
        return None if is_sim_scope(scope) or (self.llm is not None and not self.llm.may_spend(scope)) else self.llm

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
        messages, whatever scopes it spans, is stored in one transaction. Messages of members who
        opted out of memory in their scope (``withhold``), messages already stored (same scope,
        channel and platform id) and empty ones are skipped. ``progress(done, total)`` may be async."""
        total = len(messages)
        results: list[RouteResult] = []
        done = 0
        zone = self.cfg.timezone
        for start in range(0, total, INGEST_CHUNK):
            allowed, _ = await members.withhold(self.db, messages[start:start + INGEST_CHUNK])
            chunk = await records.unseen(self.db, allowed)
            if chunk:
                vectors, fitted = await asyncio.gather(
                    self.embedder.embed([self.embedder.turn(m.author, m.text) for m in chunk]),
                    run_cpu(lambda: [chattext.fit(m.author, m.text, aware(m.ts), m.attachments, zone)
                                     for m in chunk]))  # noqa: B023 (awaited within this iteration)
                by_scope: dict[str, storage.Routed] = {}
                for m, vec in zip(chunk, vectors):
                    by_scope.setdefault(m.scope, []).append((m, vec))
                results.extend(await self._route_and_store(by_scope, {id(m): f for m, f in zip(chunk, fitted)}))
            done = min(start + INGEST_CHUNK, total)
            if progress is not None:
                maybe = progress(done, total)
                if inspect.isawaitable(maybe):
                    await maybe
        return results

    async def _route_and_store(self, by_scope: dict[str, storage.Routed],
                               fitted: dict[int, chattext.Searchable] | None,
                               rows: dict[int, int] | None = None) -> list[RouteResult]:
        """Route each scope's messages under its lock (each among the worlds of its channel's
        audience), then store them all in one transaction, with what the full-text index holds
        of each (``fitted``, by ``id()`` of the message). Pending messages (``rows``: ``id()`` of
        the message -> its row, claimed by this process) are filled in instead: those forgotten
        meanwhile are left out, and each is routed in the audience its row is read under now.
        Locks are taken in scope order, so two batches never wait on each other in a cycle."""
        scopes = sorted(by_scope)
        routed: dict[str, tuple[ScopeState, list[RouteResult], set[str], set[str]]] = {}
        moved_scopes: set[str] = set()
        async with contextlib.AsyncExitStack() as held:
            for scope in scopes:
                await held.enter_async_context(self._lock(scope))
            for scope in scopes:
                if rows is not None:
                    held_now = await records.still_claimed(self.db, self.owner.id, scope,
                                                           [rows[id(m)] for m, _ in by_scope[scope]])
                    by_scope[scope] = [(m, v) for m, v in by_scope[scope] if rows[id(m)] in held_now]
                    for m, _ in by_scope[scope]:
                        m.audience = held_now[rows[id(m)]]
                    if not by_scope[scope]:
                        continue
                state = await self._scope(scope, locked=True)
                audiences, moved = await storage.settle_audiences(self.db, self.cfg, self.cache, scope, state,
                                                                  by_scope[scope])
                if moved:
                    self._mark_topics(scope, moved)
                    moved_scopes.add(scope)
                    self.messages.invalidate(scope)
                results: list[RouteResult] = []
                born: set[str] = set()
                touched: set[str] = set()
                for message, vec in by_scope[scope]:
                    channel = await self.cache.channel(scope, message.channel)
                    result = router.route(self.cfg, state, channel, message, vec, audiences[message.channel])
                    results.append(result)
                    (born if result.action == "birth" else touched).add(result.world_id)
                routed[scope] = (state, results, born, touched - born)
            try:
                async with self.db.transaction() as conn:
                    for scope, (state, results, born, touched) in routed.items():
                        if rows is None:
                            await storage.persist(conn, scope, state, by_scope[scope], results, born, touched,
                                                  fitted or {})
                        else:
                            await storage.fill_pending(conn, scope, state, by_scope[scope], results, born, touched,
                                                       [rows[id(m)] for m, _ in by_scope[scope]])
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

    # -- store first, embed later (engine.memory.pending) ------------------------------

    async def store(self, messages: list[MemoryMessage]) -> int:
        """Store chat messages at once, before they are embedded: durable, searchable by their words
        and read under their channel's audience, with no vector or world yet; the embedding worker
        routes them soon after (``embedded`` waits for it). Messages of members who opted out,
        messages already stored (pending or routed) and empty ones are left out. Returns how many
        were stored."""
        allowed, _ = await members.withhold(self.db, messages)
        fresh = await records.unseen(self.db, allowed)
        if not fresh:
            return 0
        zone = self.cfg.timezone
        fitted = await run_cpu(lambda: [chattext.fit(m.author, m.text, aware(m.ts), m.attachments, zone)
                                        for m in fresh])
        by_scope: dict[str, list[MemoryMessage]] = {}
        for m in fresh:
            by_scope.setdefault(m.scope, []).append(m)
        audiences = {scope: await storage.pending_audiences(self.db, scope, part) for scope, part in by_scope.items()}
        async with self.db.transaction() as conn:
            for scope, part in by_scope.items():
                await storage.store_pending(conn, scope, part, audiences[scope],
                                            {id(m): f for m, f in zip(fresh, fitted)})
        self.pending.wake()
        return len(fresh)

    async def embedded(self) -> None:
        """Embed and route every pending message this process may claim, now (the worker's work,
        done while the caller waits: tests, benchmarks, ``flush``)."""
        await self.pending.drain()

    async def _routed(self, scope: str) -> None:
        """Wait up to ``routed_wait_s`` for the scope's stored messages to be routed to worlds (what
        shows worlds calls it; a busy chat's backlog never holds an answer longer)."""
        await self.pending.routed(scope, self.cfg.routed_wait_s)

    async def _route_pending(self, claimed: list[tuple[int, MemoryMessage]]) -> None:
        """Embed claimed pending messages in one batch and route them (``_route_and_store``)."""
        vectors = await self.embedder.embed([self.embedder.turn(m.author, m.text) for _, m in claimed])
        by_scope: dict[str, storage.Routed] = {}
        for (_, m), vec in zip(claimed, vectors):
            by_scope.setdefault(m.scope, []).append((m, vec))
        await self._route_and_store(by_scope, None, {id(m): row for row, m in claimed})

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
        self._rename_soon(scope)

    def _rename_soon(self, scope: str) -> None:
        """Name the scope's marked worlds after ``topic_delay_s``, in a task of its own (one per scope)."""
        if self._topic_dirty.get(scope) and scope not in self._topic_tasks:
            task = asyncio.get_running_loop().create_task(
                topics.rename_later(self.cfg.topic_delay_s, lambda: self.refresh_topics(scope), scope))
            self._topic_tasks[scope] = task
            task.add_done_callback(lambda done: self._topic_tasks.pop(scope, None)
                                   if self._topic_tasks.get(scope) is done else None)

    async def _stop_renaming(self) -> None:
        """Cancel the scopes' background renamings and wait until they have stopped: a renaming cut
        short marks its worlds again as it unwinds, so only after the wait are the marks complete."""
        tasks = list(self._topic_tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

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
        vec = (await self.embedder.embed([retrieval.cap(text)], kind="query"))[0]
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
        if not state.worlds:   # a chat just begun: its first messages get their world in a moment
            await self._routed(viewer.scope)
            state = await self._scope(viewer.scope)
        return await retrieval.recall(self.db, self.embedder, self.messages, state.indexes, viewer, query,
                                      k or self.cfg.recall_k, retrieval.Tuning.of(self.cfg))

    async def ask(self, viewer: Viewer | str, question: str, channel: str | None = None) -> AskResult:
        """An answer grounded in what recall finds across worlds, in the question's language (or,
        unclear, the dominant one of ``channel``, where it is asked: engine.memory.languages);
        answer is None without an LLM, and no LLM call is made when memory holds nothing about
        the question."""
        viewer = Viewer.of(viewer)
        result = await self.recall(viewer, question, self.cfg.recall_k * 2)
        if self.llm is None or not result.found:
            return AskResult(None, result)
        lang = await languages.of_question(self.db, viewer.scope, channel, question)
        answer = await self.llm.chat(recall_mod.ask_prompt(question, result, lang), activity="memory.ask",
                                     scope=viewer.scope, language=lang)
        return AskResult(answer.strip(), result)

    async def worlds(self, viewer: Viewer | str, archived: bool = False) -> list[WorldInfo]:
        """Every world in use of the scope the viewer sees (``archived``: archived ones too), most
        recently active first."""
        viewer = Viewer.of(viewer)
        await self._routed(viewer.scope)
        return await retrieval.world_infos(self.db, viewer, archived=archived)

    async def unsorted(self, viewer: Viewer | str) -> int:
        """How many messages the viewer may read are stored but not yet in a world: the embedding
        worker is behind (a burst, an import, a restart)."""
        return await retrieval.unsorted(self.db, Viewer.of(viewer))

    async def world(self, viewer: Viewer | str, name_or_id: str) -> tuple[WorldInfo, list[Belief]] | None:
        """A world the viewer sees, by id, id prefix or topic words, with all its beliefs (superseded ones
        too), newest first."""
        viewer = Viewer.of(viewer)
        await self._routed(viewer.scope)
        match = await retrieval.find_world(self.db, viewer, name_or_id)
        if match is None:
            return None
        return match, await retrieval.world_beliefs(self.db, viewer, match.id)

    async def recent_messages(self, viewer: Viewer | str, world_id: str) -> list[Evidence]:
        """A world's newest messages that the viewer sees, newest first."""
        return await retrieval.recent_messages(self.db, Viewer.of(viewer), world_id)

    async def messages_of(self, scope: str) -> dict[str, list[str]]:
        """world id -> platform ids of the messages it holds, in order (for exports)."""
        return await records.platform_ids_by_world(self.db, scope)

    async def digest(self, viewer: Viewer | str, since: datetime | str) -> digest_mod.Digest:
        """What changed since ``since`` in the worlds the viewer sees: new and grown worlds, new and
        superseded beliefs, merges (engine.memory.digest; every entry names its world's topic)."""
        viewer = Viewer.of(viewer)
        await self._routed(viewer.scope)
        visible = {w.id: w for w in await retrieval.world_infos(self.db, viewer)}
        return await digest_mod.digest(self.db, viewer, visible, aware(parse_ts(since) if isinstance(since, str)
                                                                       else since))

    # -- forgetting and maintenance ----------------------------------------------------

    async def forget(self, scope: str, channel: str | None = None) -> dict[str, int]:
        """Forget one channel of a scope (its messages, the beliefs resting only on them, the worlds
        left empty), or the whole scope when ``channel`` is None."""
        async with self._lock(scope):
            touched: set[str] = set()
            if channel is None:
                counts, forgotten = await storage.forget_scope(self.db, self.cache, scope)
            else:
                counts, forgotten, touched = await storage.forget_where(self.db, self.cache, scope, "channel=?",
                                                                        (channel,))
                self.cache.forget_channel(scope, channel)
            self.messages.invalidate(scope)
        self._rename_after_forgetting(scope, touched)
        await self._tell_forgotten(forgotten)
        return counts

    async def forget_messages(self, scope: str, message_ids: list[int]) -> dict[str, int]:
        """Forget these stored messages of a scope (memory ids), the beliefs resting only on them and
        the worlds left empty."""
        ids = sorted(set(message_ids))
        if not ids:
            return {"messages": 0, "beliefs": 0, "worlds": 0}
        async with self._lock(scope):
            counts, forgotten, touched = await storage.forget_where(
                self.db, self.cache, scope, f"id IN ({','.join('?' * len(ids))})", tuple(ids))
            self.messages.invalidate(scope)
            self.cache.forget(scope)  # in a channel's routing context, the scope's centre, a speaker's mean
        self._rename_after_forgetting(scope, touched)
        await self._tell_forgotten(forgotten)
        return counts

    async def forget_belief(self, scope: str, belief_id: int) -> dict[str, int]:
        """Forget one belief of a scope (its messages stay); its world is recentred, or removed when
        it held nothing else."""
        async with self._lock(scope):
            counts, forgotten, touched = await storage.forget_where(self.db, self.cache, scope, None, (), [belief_id])
            self.messages.invalidate(scope)
        self._rename_after_forgetting(scope, touched)
        await self._tell_forgotten(forgotten)
        return counts

    async def forget_author(self, scope: str, author_id: str) -> dict[str, int]:
        """Forget one person's messages in a scope, the beliefs resting only on them and the
        worlds left empty; other people's messages stay."""
        if not author_id:
            raise ValueError("forget_author needs an author id")
        async with self._lock(scope):
            counts, forgotten, touched = await storage.forget_where(self.db, self.cache, scope, "author_id=?",
                                                                    (author_id,))
            self.messages.invalidate(scope)
            self.cache.forget(scope)  # in any channel's routing context, the scope's centre, their speaker mean
        self._rename_after_forgetting(scope, touched)
        await self._tell_forgotten(forgotten)
        return counts

    def _rename_after_forgetting(self, scope: str, touched: set[str]) -> None:
        """Worlds that lost messages were named provisionally after what they still hold (nothing
        forgotten shows); they are named properly soon, in the background: at 300k messages,
        naming every world again took 8 s of a /forget me (bench/forget.py)."""
        self._mark_topics(scope, touched)
        self._rename_soon(scope)

    async def _tell_forgotten(self, forgotten: Forgotten) -> None:
        """Hand what was forgotten to every ``on_forget`` listener (copies kept elsewhere go too).
        A listener that fails is logged: memory has forgotten already, and the others still run."""
        if not forgotten:
            return
        for listener in self.on_forget:
            try:
                await listener(forgotten)
            except Exception:
                log.exception("a listener of forgotten memory failed for %s", forgotten.scope)

    # -- snapshots for simulations' briefs (engine.memory.snapshot) ------------------------------

    async def snapshot(self, viewer: Viewer, *, world_id: str | None = None, channel: str | None = None,
                       since: datetime | None = None, limit: int = snapshot_mod.LIMIT) -> snapshot_mod.Snapshot:
        """One world's or one channel's latest messages and current beliefs as the viewer reads
        them, without members who opted out (engine.memory.snapshot); waits up to ``routed_wait_s``
        for the scope's stored messages to get their world first, as a snapshot reads routed ones."""
        await self._routed(viewer.scope)
        return await snapshot_mod.take(self.db, viewer, world_id=world_id, channel=channel, since=since, limit=limit)

    async def still_held(self, scope: str, messages: dict[int, datetime],
                         beliefs: dict[int, tuple[str, tuple[int, ...]]]) -> tuple[set[int], set[int]]:
        """Of these messages (id -> when written) and beliefs (id -> statement and sources), as a
        snapshot took them, those memory still holds and whose authors have not opted out since."""
        return await snapshot_mod.still_held(self.db, scope, messages, beliefs)

    # -- members (engine.memory.members) ---------------------------------------------------

    async def withhold(self, messages: list[MemoryMessage]) -> tuple[list[MemoryMessage], members.Withheld]:
        """The messages that may be stored, and how many are left out because their authors opted
        out of memory (matched by id, or by name where a message has no author id)."""
        return await members.withhold(self.db, messages)

    async def opt_out(self, scope: str, author_id: str, author_name: str) -> members.OptOut:
        """Store none of ``author_id``'s messages in ``scope`` from now on, by any path."""
        if not author_id:
            raise ValueError("opt_out needs an author id")
        return await members.opt_out(self.db, scope, author_id, author_name)

    async def opt_in(self, scope: str, author_id: str) -> bool:
        return await members.opt_in(self.db, scope, author_id)

    async def opt_out_of(self, scope: str, author_id: str) -> members.OptOut | None:
        return await members.opt_out_of(self.db, scope, author_id)

    async def opted_out(self, scope: str) -> list[members.OptOut]:
        return await members.opted_out(self.db, scope)

    async def about(self, viewer: Viewer | str, author_id: str, author_name: str) -> members.About:
        """What memory holds about one member, as far as the viewer's audience reads (/me)."""
        viewer = Viewer.of(viewer)
        await self._routed(viewer.scope)
        return await members.about(self.db, viewer, author_id, author_name)

    async def export_member(self, scope: str, author_id: str = "", author_name: str = "") -> dict:
        """One member's messages in a scope and the beliefs resting on them (/export me)."""
        return await members.export_member(self.db, scope, author_id, author_name)

    async def find_message(self, viewer: Viewer, asker_id: str, **where) -> members.StoredMessage | None:
        """A stored message the viewer's audience reads, or the asker's own (members.find_message)."""
        return await members.find_message(self.db, viewer, asker_id, **where)

    async def find_belief(self, viewer: Viewer, belief_id: int) -> tuple[Belief, set[str]] | None:
        """A belief the viewer's audience reads, with the author ids of its sources."""
        return await members.find_belief(self.db, viewer, belief_id)

    async def last_said(self, scope: str, channel: str, author_id: str) -> tuple[int, datetime] | None:
        """The memory id and time of ``author_id``'s last message in ``channel`` (None: none held)."""
        return await records.last_said(self.db, scope, channel, author_id)

    async def catchup(self, viewer: Viewer, channel: str, since: datetime,
                      after: int | None = None) -> catchup_mod.Catchup:
        """What was said in ``channel`` since ``since`` (or after the stored message ``after``), per
        topic world: the main points, decisions and open questions in one LLM call, or without an
        LLM its most central messages (engine.memory.catchup). Waits up to ``routed_wait_s`` for the
        scope's stored messages to get their world first: a catch-up is told by topic world."""
        await self._routed(viewer.scope)
        return await catchup_mod.catchup(self.db, self.llm_for(viewer.scope), self.cfg, viewer, channel, since,
                                         after)

    async def merge(self, scope: str) -> list[dict]:
        """Merge every pair of worlds above the merge threshold until none is left; worlds merge only
        within their audience."""
        async with self._lock(scope):
            state = await self._scope(scope, locked=True)
            merged = await lifecycle.merge_scope(self.db, self.cache, scope, state, self.cfg.merge_threshold)
        self._mark_topics(scope, {m["kept"] for m in merged})
        return merged

    async def maintain(self, scope: str | None = None, now: datetime | None = None) -> dict[str, int]:
        """Daily upkeep (engine.memory.lifecycle): decay belief confidence and retire what fell
        below the floor, archive quiet worlds left without a belief in recall, merge near-duplicate
        worlds, remove dead ones, rename worlds that grew. Nothing is deleted by decay. ``scope``
        None: every scope; ``now``: the moment it runs as (default: now)."""
        scopes = [scope] if scope else await records.scopes(self.db)
        now = now or utcnow()
        totals = {"decayed": 0, "retired": 0, "archived": 0, "merged": 0, "removed": 0, "renamed": 0}
        for s in scopes:
            async with self._lock(s):
                async with self.db.transaction() as conn:
                    totals["decayed"] += await belief_store.decay(conn, s, now, self.cfg.half_life_days)
                    totals["retired"] += await belief_store.retire(conn, s, self.cfg.belief_floor, now)
                archived = await lifecycle.archive_quiet(self.db, s, now, self.cfg.world_ttl_days)
                self.cache.drop_worlds(archived)   # out of routing; their messages stay recallable
                totals["archived"] += len(archived)
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
        marked = set() if every else self._topic_dirty.pop(scope, set())
        try:
            state = await self._scope(scope)
            targets = set(state.worlds) if every else marked & set(state.worlds)
            if not targets:
                return 0
            return await topics.name_worlds(self.db, self.llm_for(scope), self.cfg, scope, state, targets)
        except asyncio.CancelledError:   # (``flush`` cancels a renaming under way) they still need names
            self._mark_topics(scope, marked)
            raise
        except Exception as err:   # they still need names: at the next renaming of the scope
            self._mark_topics(scope, marked)
            if not self.db.unreachable(err):
                raise
            log.warning("worlds of %s not renamed: the database cannot be reached (%s); renamed at the next refresh",
                        scope, type(err).__name__)
            return 0

    # -- belief extraction (engine.memory.extraction) ----------------------------------

    async def flush(self) -> None:
        """Embed the stored messages that wait for it, run all pending belief extraction and topic
        naming now, and wait for it."""
        await self.embedded()
        await self.extraction.drain()
        if self.llm is not None:
            for scope, channel in await records.unread_channels(self.db):
                while await self._extract_channel(scope, channel):
                    pass
        await self._stop_renaming()
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
        return await records.unread_count(self.db, scope, channel)
