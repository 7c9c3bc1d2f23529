"""Entity resolution (step 2's merge of extracted names into actors): time and event-loop lag.

Synthetic extractions (``tests.entity_data``: people with titles, possessives, lone surnames and
middle initials, organisations with articles and apostrophes) holding N distinct normalised
names. Names are embedded once with the real MiniLM; the timed runs answer from that cache, so
the figures are resolution alone.

For each N, ``resolve`` of this checkout and ``resolve`` as it was at ``--before`` (a git
revision, read with ``git show``) run on the same input; printed: seconds, the worst event
loop lag seen by a 10 ms ticker while it ran, and whether both made the same groups.

    python -m bench.entity_resolution [--sizes 500,2000] [--before REV] [--threshold 0.86]
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from engine.sim.graph import resolve
from engine.sim.graphstore import normalise_name
from engine.sim.ontology import normalise
from tests.entity_data import synthetic_extractions

REPO = Path(__file__).resolve().parent.parent
class CachedEmbedder:
    """Answers from vectors computed once, so timing sees resolution only."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.vstack([self.table[t] for t in texts]).astype(np.float32)


def load_before(rev: str):
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:engine/sim/graph.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "graph_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("graph_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["graph_before"] = module
    spec.loader.exec_module(module)
    module.normalise_name = normalise_name.__wrapped__  # as it was: without the cache added since
    return module.resolve


async def timed(fn, *args) -> tuple[float, float, tuple]:
    """Seconds ``fn`` took and the worst lag of a 10 ms ticker on the same loop meanwhile."""
    worst = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal worst
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            worst = max(worst, time.perf_counter() - before - 0.01)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.02)
    start = time.perf_counter()
    result = await fn(*args)
    elapsed = time.perf_counter() - start
    done.set()
    await ticker
    return elapsed, worst, result


def groups_of(entities) -> list[tuple[str, ...]]:
    return sorted(tuple(sorted([e.name, *e.aliases])) for e in entities)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="500,2000")
    parser.add_argument("--before", default="cca282b", help="git revision of the earlier resolve")
    parser.add_argument("--threshold", type=float, default=0.86)
    args = parser.parse_args()
    from engine.embedder import Embedder
    from engine.config import EmbedderSection

    cfg = EmbedderSection()
    embedder = Embedder(cfg.model, cfg.batch_size, cfg.device)
    before = load_before(args.before)
    ontology = normalise(None)
    print("| names | before s | after s | speed-up | before worst loop lag ms | after worst loop lag ms "
          "| same groups | merged by embedding |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        extractions = synthetic_extractions(n)
        names = sorted({e.name.strip() for _, ex in extractions for e in ex.entities}
                       | {x for _, ex in extractions for r in ex.relations for x in (r.source.strip(), r.target.strip())})
        vectors = await embedder.embed(names)
        cached = CachedEmbedder(dict(zip(names, vectors)))
        t0, lag0, (ents0, edges0, stats0) = await timed(before, extractions, ontology, cached, args.threshold)
        normalise_name.cache_clear()  # a cold cache, as in a fresh graph step
        t1, lag1, (ents1, edges1, stats1) = await timed(resolve, extractions, ontology, cached, args.threshold)
        same = groups_of(ents0) == groups_of(ents1) and len(edges0) == len(edges1)
        print(f"| {stats1['names']:,} | {t0:.2f} | {t1:.3f} | {t0 / t1:.1f}x | {lag0 * 1000:.0f} | {lag1 * 1000:.0f} "
              f"| {'yes' if same else 'NO'} | {stats0['merged_by_embedding']} / {stats1['merged_by_embedding']} |")


if __name__ == "__main__":
    asyncio.run(main())
