"""What /forget me costs on a large SQLite database, and how much of it is purging the full-text
indexes (merging their segments, so the forgotten words leave them: engine.memory.storage).

``--n`` messages of real English text by 50 authors in one scope, written straight into SQLite
(bench.recall_latency.fill); then one author's messages are forgotten through the engine, the
worlds it touched are named again (in the background after a real /forget), and another
author's rows are deleted straight and the purge timed on its own after them.

    python -m bench.forget [--n 300000]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.recall_latency import SCOPE, fill, sentences
from engine.config import MemorySection
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine
from engine.memory.storage import purge_search_index


async def run(args) -> None:
    pool = sentences()
    texts = [pool[i % len(pool)] for i in range(args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "bench.sqlite3")
        embedder = Embedder()
        await fill(db, texts, embedder.dim, np.random.default_rng(0))
        await db.execute("UPDATE memory_messages SET author_id=author")   # fill names authors only
        size = (Path(tmp) / "bench.sqlite3").stat().st_size / 2**20
        print(f"{args.n:,} messages, database {size:.0f} MiB; load average {os.getloadavg()[0]:.1f}")
        engine = MemoryEngine(db, embedder, MemorySection())
        await engine.start()
        t = time.perf_counter()
        counts = await engine.forget_author(SCOPE, "user7")   # fill's authors: user0..user49
        print(f"/forget me of user7 (engine.forget_author): {counts['messages']:,} messages in "
              f"{time.perf_counter() - t:.2f} s, everything included")
        t = time.perf_counter()
        renamed = await engine.refresh_topics(SCOPE, every=True)
        print(f"naming the worlds again (as many as it touched: {renamed}), which /forget leaves to the "
              f"background: {time.perf_counter() - t:.2f} s")
        t = time.perf_counter()
        await db.execute("DELETE FROM memory_messages WHERE scope=? AND author_id='user8'", (SCOPE,))
        deleted = time.perf_counter() - t
        t = time.perf_counter()
        await purge_search_index(db)
        print(f"the same number of rows deleted alone (user8): {deleted:.2f} s; the purge of the full-text "
              f"indexes after it: {time.perf_counter() - t:.2f} s; load average {os.getloadavg()[0]:.1f}")
        await engine.close()
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300_000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
