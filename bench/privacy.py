"""Channel privacy in the memory engine: leaks into a public channel, and the cost of a move.

One scope holds two channels of a labelled chat corpus: 'general' and 'staff', the staff channel
taking every line of a few topics. Both start public, as every channel was before audiences.
Probes ask, as a viewer in 'general', with staff lines as queries: recall (does the result show a
staff message, or a world holding one?), the world list and the digest (do they list a world
holding a staff message?). Then 'staff' is made private (``set_audiences``): the time the move
takes and the longest stall of the event loop during it are measured, and the same probes run
again, along with the positive control of the same probes from inside 'staff'.

    python -m bench.privacy [--corpus chatterbot|bbc] [--staff-topics 3] [--probes 200]
"""
from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.corpus import CORPORA, chat_stream, load_corpus
from engine.config import load_config
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage
from engine.memory.audience import Viewer
from engine.services import build_services

SCOPE = "bench:guild"
STAFF = "staff-audience"
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


async def staff_worlds(db) -> set[str]:
    rows = await db.fetchall("SELECT DISTINCT world_id FROM memory_messages WHERE channel='staff'")
    return {r["world_id"] for r in rows}


async def probe(engine: MemoryEngine, db, viewer: Viewer, queries: list[str]) -> dict[str, int]:
    """How many probes of each kind showed something of the staff channel."""
    holding = await staff_worlds(db)
    hits = {"recall": 0, "worlds": 0, "digest": 0}
    for query in queries:
        found = await engine.recall(viewer, query)
        if (found.world is not None and found.world.id in holding) or any(e.channel == "staff" for e in found.evidence):
            hits["recall"] += 1
    listed = {w.id for w in await engine.worlds(viewer)}
    hits["worlds"] = int(bool(listed & holding))
    digest = await engine.digest(viewer, T0 - timedelta(days=1))
    shown = {w.id for w in digest.new_worlds + digest.grown_worlds}
    hits["digest"] = int(bool(shown & holding))
    return hits


async def loop_stall(stop: asyncio.Event, worst: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        worst[0] = max(worst[0], now - last)
        last = now


async def run(args) -> None:
    config = load_config(args.config)
    lines = chat_stream(load_corpus(args.corpus))
    rng = random.Random(args.seed)
    topics = sorted({line.topic for line in lines})
    staff_topics = set(rng.sample(topics, args.staff_topics))
    messages = [MemoryMessage(SCOPE, "staff" if line.topic in staff_topics else "general", str(i), "user",
                              line.text, T0 + timedelta(seconds=20 * i)) for i, line in enumerate(lines)]
    staff_lines = [m.text for m in messages if m.channel == "staff"]
    queries = [rng.choice(staff_lines) for _ in range(args.probes)]
    embedder = Embedder.from_config(config.embedder)
    await embedder.embed(["warm up"])
    with tempfile.TemporaryDirectory() as tmp:
        services = build_services(config, await open_database(Path(tmp) / "memory.sqlite3"), llm=False, sims=False,
                                  embedder=embedder)
        engine, db = services.memory, services.db
        try:
            await services.start(jobs=False)
            await engine.ingest_many(messages)
            await engine.refresh_topics(SCOPE, every=True)  # named, as a running bot names them
            public = Viewer(SCOPE)
            before = await probe(engine, db, public, queries)
            stop, worst = asyncio.Event(), [0.0]
            ticker = asyncio.create_task(loop_stall(stop, worst))
            t0 = time.perf_counter()
            await engine.set_audiences(SCOPE, {"staff": STAFF, "general": ""})
            move_s = time.perf_counter() - t0
            stop.set()
            await ticker
            after = await probe(engine, db, public, queries)
            inside = await probe(engine, db, Viewer(SCOPE, STAFF), queries)
            worlds = len(await engine.worlds(Viewer.operator(SCOPE)))
        finally:
            await services.close()
    n_staff = len(staff_lines)
    print(f"{args.corpus}: {len(messages)} messages, {n_staff} of them in 'staff' ({len(staff_topics)} of "
          f"{len(topics)} topics); {worlds} worlds after the move")
    print(f"public viewer, staff channel still public:  recall {before['recall']}/{args.probes}, "
          f"worlds {before['worlds']}/1, digest {before['digest']}/1 probes show staff memory")
    print(f"public viewer, staff channel made private:  recall {after['recall']}/{args.probes}, "
          f"worlds {after['worlds']}/1, digest {after['digest']}/1 probes show staff memory")
    print(f"staff viewer (positive control):            recall {inside['recall']}/{args.probes}, "
          f"worlds {inside['worlds']}/1, digest {inside['digest']}/1")
    print(f"move of {n_staff} messages: {move_s:.2f} s, longest event-loop stall {worst[0] * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=None)
    parser.add_argument("--corpus", choices=CORPORA, default="chatterbot")
    parser.add_argument("--staff-topics", type=int, default=3)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
