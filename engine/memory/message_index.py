"""Vector search over a scope's message (and belief) vectors, one partition per (table, scope,
audience).

Recall searches every message of the scope the viewer may read, so it needs the nearest
messages to a query among up to 100k vectors within a few milliseconds; beliefs (one or more
per extracted batch of messages) are searched the same way. Each partition keeps
its vectors in memory: exactly (a NumPy matrix and one matrix product) while it is small, and
in an hnswlib graph (labels are the messages' row ids) once it holds more than ``exact_max``
vectors. The graph is built in a thread of its own from a snapshot (minutes at 100k on two
cores); meanwhile the matrix keeps answering and collects what arrives, folded in when the
build is done.

The index follows the database, never the other way round: ``catch_up`` reads the rows stored
since it last looked (``scope = ? AND id > max_id``, one range of the (scope, id) index, so
other servers' newer rows are never read), whoever wrote them (this bot's
ingest, an import from the command line, belief extraction), so ingest itself never waits on
it. Deletions and audience moves make a scope's index stale: the engine calls ``invalidate``
and it is rebuilt on the next search. A belief superseded later stays in the index; the SQL
that loads the hits drops it. Privacy does not rest on the index either: the rows it returns
are loaded again through SQL that filters by the viewer (engine.memory.retrieval).

Cold scopes on PostgreSQL: loading a scope's vectors is one read of every row's embedding over
the wire, which each bot process pays once per scope (bench/storage_backends.py, 20k messages:
0.5-0.8 s). There the vectors are pgvector columns, so until the process's partition is loaded
a search is answered by the server (``nearest_on_server``: pgvector's exact ``<=>`` scan of the
scope, filtered by the viewer in SQL; 57-98 ms at 20k) while the load runs in the background
(a process's first recall: 208 ms instead of 642 ms in one run). Once loaded, the process's own
index answers (1-3 ms). No HNSW index backs that scan: the
columns have no fixed dimension (the embedding model is configurable), and the scan serves only
the first searches of a process. SQLite reads its own file, so it loads at once.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

import hnswlib
import numpy as np

from engine.db import Database
from engine.memory import records
from engine.memory.audience import Viewer
from engine.offload import run_cpu

log = logging.getLogger(__name__)

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 100
HNSW_EF_MIN = 100   # query-time ef; at least the number of neighbours asked for
TABLES = ("memory_messages", "beliefs")   # tables with scope, world_id and an embedding column


def next_capacity(capacity: int) -> int:
    """The next capacity of a partition that is full: a quarter more (and at least 1,024 rows), not
    twice as much. Each growth copies the vectors, so a quarter keeps that cheap over time, while a
    scope of 20k messages doubled would hold 30 MB (e5) it has no rows for."""
    return capacity + max(capacity // 4, 1024)


class Partition:
    """The message vectors of one audience of one scope. Every method may run in a worker
    thread; ``_lock`` keeps hnswlib's add and query apart (they are not safe together)."""

    def __init__(self, dim: int, exact_max: int):
        self.dim, self.exact_max = dim, exact_max
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)           # rows answered exactly
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self._graph: hnswlib.Index | None = None
        self._building = False

    def __len__(self) -> int:
        return self._n + (self._graph.get_current_count() if self._graph is not None else 0)

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        with self._lock:
            if self._graph is not None and not self._building:
                if self._graph.get_current_count() + len(ids) > self._graph.get_max_elements():
                    self._graph.resize_index(max(next_capacity(self._graph.get_max_elements()),
                                                 self._graph.get_current_count() + len(ids)))
                self._graph.add_items(vecs, ids, num_threads=1)
                return
            if self._n + len(ids) > len(self._ids):
                cap = max(next_capacity(len(self._ids)), self._n + len(ids))
                self._ids = np.resize(self._ids, cap)
                vecs_now = np.zeros((cap, self.dim), dtype=np.float32)
                vecs_now[:self._n] = self._vecs[:self._n]
                self._vecs = vecs_now
            self._ids[self._n:self._n + len(ids)] = ids
            self._vecs[self._n:self._n + len(ids)] = vecs
            self._n += len(ids)

    def wants_graph(self) -> bool:
        return self._graph is None and not self._building and self._n > self.exact_max

    def build_graph(self) -> None:
        """Build the hnswlib graph from a snapshot of the exact rows, then fold in what arrived
        meanwhile and let the graph answer. Runs in a thread of its own."""
        with self._lock:
            self._building = True
            count = self._n
            ids, vecs = self._ids[:count].copy(), self._vecs[:count].copy()
        graph = hnswlib.Index(space="cosine", dim=self.dim)
        graph.init_index(max_elements=int(count * 1.25) + 1024, M=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION)
        graph.add_items(vecs, ids, num_threads=1)
        with self._lock:
            late = self._n - count
            if late:
                if graph.get_current_count() + late > graph.get_max_elements():
                    graph.resize_index(graph.get_current_count() + late + 1024)
                graph.add_items(self._vecs[count:self._n], self._ids[count:self._n], num_threads=1)
            self._graph, self._building = graph, False
            self._ids = np.zeros(0, dtype=np.int64)
            self._vecs = np.zeros((0, self.dim), dtype=np.float32)
            self._n = 0

    def search(self, query: np.ndarray, n: int) -> list[tuple[int, float]]:
        """The ``n`` nearest messages as (row id, cosine similarity), most similar first."""
        hits: list[tuple[int, float]] = []
        with self._lock:
            if self._n:
                sims = self._vecs[:self._n] @ query
                top = np.argpartition(-sims, n - 1)[:n] if self._n > n else np.arange(self._n)
                hits += [(int(self._ids[i]), float(sims[i])) for i in top]
            if self._graph is not None:
                k = min(n, self._graph.get_current_count())
                if k:
                    self._graph.set_ef(max(HNSW_EF_MIN, k))
                    labels, dists = self._graph.knn_query(query.reshape(1, -1), k=k, num_threads=1)
                    hits += [(int(lab), 1.0 - float(d)) for lab, d in zip(labels[0], dists[0])]
        hits.sort(key=lambda h: -h[1])
        return hits[:n]


class ScopeVectors:
    def __init__(self):
        self.max_id = 0
        self.parts: dict[str, Partition] = {}
        self.lock = asyncio.Lock()
        self.loaded = False   # the first catch_up finished


async def nearest_on_server(db: Database, viewer: Viewer, query: np.ndarray, n: int,
                            table: str = TABLES[0]) -> list[tuple[int, float]]:
    """The ``n`` rows of ``table`` nearest to ``query`` among the audiences the viewer sees, as
    (row id, cosine), computed by PostgreSQL (pgvector's cosine distance ``<=>``)."""
    if table not in TABLES:
        raise ValueError(f"no vectors in table {table!r}")
    sees, seen = viewer.where("w.audience")
    vec = np.asarray(query, dtype="<f4").tobytes()
    rows = await records.nearest_in_worlds(db, table, vec, viewer.scope, sees, seen, n)
    return [(r["id"], 1.0 - float(r["d"])) for r in rows]


class MessageIndex:
    """The message and belief vectors of every scope recall has searched, by audience."""

    def __init__(self, exact_max: int = 20_000):
        self.exact_max = exact_max
        self._scopes: dict[tuple[str, str], ScopeVectors] = {}   # (table, scope) ->
        self._builds: set[asyncio.Future] = set()
        self._loads: set[asyncio.Task] = set()   # background loads of cold scopes (PostgreSQL)

    def invalidate(self, scope: str) -> None:
        """Messages or beliefs of ``scope`` were deleted or changed audience: rebuild on next search."""
        for table in TABLES:
            self._scopes.pop((table, scope), None)

    async def catch_up(self, db: Database, scope: str, table: str = TABLES[0]) -> ScopeVectors:
        """The scope's vectors, with every row stored since the last look added."""
        if table not in TABLES:
            raise ValueError(f"no vectors in table {table!r}")
        key = (table, scope)
        vectors = self._scopes.setdefault(key, ScopeVectors())
        async with vectors.lock:
            # A message stored but not yet embedded (engine.memory.pending) is routed later: the index
            # stops below the scope's oldest such row, so no row is passed over for good.
            rows = await records.vectors_after(db, table, scope, vectors.max_id)
            if rows and self._scopes.get(key) is vectors:
                await run_cpu(self._add_rows, vectors, rows)
                vectors.max_id = rows[-1]["id"]
                for part in vectors.parts.values():
                    if part.wants_graph():
                        part._building = True  # claimed here, on the loop: one build per partition
                        self._start_build(part)
            vectors.loaded = True
        return vectors

    def _load_later(self, db: Database, scope: str, table: str) -> None:
        """Load a cold scope's vectors in the background (once: a second search finds it under way)."""
        key = (table, scope)
        if key in self._scopes:
            return
        vectors = self._scopes[key] = ScopeVectors()
        task = asyncio.get_running_loop().create_task(self.catch_up(db, scope, table))
        self._loads.add(task)

        def done(task: asyncio.Task) -> None:
            self._loads.discard(task)
            if task.cancelled() or task.exception() is not None:
                if self._scopes.get(key) is vectors:
                    self._scopes.pop(key)   # the next search asks the server again and retries the load
                if not task.cancelled():
                    log.warning("loading the vectors of %s failed", scope, exc_info=task.exception())

        task.add_done_callback(done)

    async def close(self) -> None:
        """Stop background loads (the database is about to close)."""
        for task in list(self._loads):
            task.cancel()
        if self._loads:
            await asyncio.gather(*list(self._loads), return_exceptions=True)

    def _start_build(self, part: Partition) -> None:
        """Build in a daemon thread: minutes at 100k vectors, which must neither hold a worker of
        the shared CPU pool nor keep the process from exiting."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._builds.add(done)
        done.add_done_callback(self._builds.discard)

        def finish() -> None:
            if not done.done():
                done.set_result(None)

        def work() -> None:
            try:
                part.build_graph()
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(finish)

        threading.Thread(target=work, name="message-index-build", daemon=True).start()

    def _add_rows(self, vectors: ScopeVectors, rows) -> None:
        dim = len(rows[0]["embedding"]) // 4
        by_audience: dict[str, list] = {}
        for r in rows:
            by_audience.setdefault(r["audience"], []).append(r)
        for audience, part_rows in by_audience.items():
            part = vectors.parts.get(audience)
            if part is None:
                part = vectors.parts[audience] = Partition(dim, self.exact_max)
            ids = np.fromiter((r["id"] for r in part_rows), dtype=np.int64, count=len(part_rows))
            vecs = np.frombuffer(b"".join(r["embedding"] for r in part_rows), dtype=np.float32).reshape(-1, dim)
            part.add(ids, vecs)

    async def search(self, db: Database, viewer: Viewer, query: np.ndarray, n: int,
                     table: str = TABLES[0]) -> list[tuple[int, float]]:
        """The ``n`` rows of ``table`` nearest to ``query`` among the audiences the viewer sees,
        as (row id, cosine). On PostgreSQL, a scope not loaded yet is searched by the server while
        it loads."""
        if db.dialect == "postgresql":
            vectors = self._scopes.get((table, viewer.scope))
            if vectors is None or not vectors.loaded:
                self._load_later(db, viewer.scope, table)
                return await nearest_on_server(db, viewer, query, n, table)
        vectors = await self.catch_up(db, viewer.scope, table)
        parts = [p for audience, p in vectors.parts.items() if viewer.sees(audience)]
        if not parts:
            return []
        query = np.asarray(query, dtype=np.float32)

        def search_all() -> list[tuple[int, float]]:
            hits = [h for p in parts for h in p.search(query, n)]
            hits.sort(key=lambda h: -h[1])
            return hits[:n]

        return await run_cpu(search_all)

    async def settle(self) -> None:
        """Wait for vector loads and graph builds under way (benchmarks, shutdown)."""
        if self._loads:
            await asyncio.gather(*list(self._loads), return_exceptions=True)
        if self._builds:
            await asyncio.gather(*list(self._builds), return_exceptions=True)
