"""Routing quality on the labelled chat corpus: the reference rule and ours, side by side.

The corpus (bench.corpus: chatterbot-corpus, 12 topics) is replayed through the real
MemoryEngine, one fresh database per rule, as one channel that talks about a topic for three
conversations and then changes topic; messages are 20 s apart. After the replay the daily
upkeep runs (merge). Figures per rule, before and after the merge:

* worlds per true topic: worlds / topics (1.0 would be one world per topic);
* purity: the share of messages whose world's majority topic is their own topic;
* NMI: normalised mutual information between worlds and topics (sklearn).

Rules: ``reference`` is the design's rule as written (threshold 0.60 + 0.10 x maturity, merge
above 0.94, no conversation context); ``ours`` is the configured [memory] section; the
``ours -x`` rows switch off one part of ours to show what it contributes.
``--fillers`` adds replies with no topic of their own ("ok", "haha", "what about tomorrow?"),
labelled with the topic being discussed, to see what the short-message rule does with them.

Before the rules, the same figures for offline clusterings of the same message vectors, as
ceilings for any router that sees one message at a time: k-means (scikit-learn, 10 starts)
with one and with three clusters per topic, over messages, and over whole conversations (a
router told where every conversation starts and ends).

    python -m bench.routing [--config config.toml] [--corpus chatterbot|bbc] [--data held-out|all]
                            [--fillers 0.2] [--seed 0]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from bench.corpus import CORPORA, FILLERS, ChatLine, chat_stream, load_corpus, split_halves, with_fillers
from engine.config import MemorySection, load_config
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
SCOPE = "bench:routing"


def rules(ours: MemorySection) -> dict[str, MemorySection]:
    return {
        "reference": ours.model_copy(update={"base_threshold": 0.60, "maturity_gain": 0.10, "merge_threshold": 0.94,
                                             "context_weight": 0.0, "short_window_s": 0.0}),
        "ours": ours,
        "ours -context": ours.model_copy(update={"context_weight": 0.0}),
        "ours -short follow": ours.model_copy(update={"short_window_s": 0.0}),
    }


def scores(lines: list[ChatLine], world_of: dict[str, str]) -> dict[str, float]:
    topics = [line.topic for line in lines]
    worlds = [world_of[str(i)] for i in range(len(lines))]
    majority: Counter[str] = Counter()
    for w in set(worlds):
        majority[w] = Counter(t for t, x in zip(topics, worlds) if x == w).most_common(1)[0][1]
    return {"worlds": len(set(worlds)), "per_topic": len(set(worlds)) / len(set(topics)),
            "purity": sum(majority.values()) / len(lines),
            "nmi": normalized_mutual_info_score(topics, worlds)}


def ceilings(lines: list[ChatLine], vectors: np.ndarray, seed: int) -> list[tuple[str, dict[str, float]]]:
    """(name, scores) of each offline clustering of the message vectors."""
    topics = len({line.topic for line in lines})
    convs = sorted({line.conversation for line in lines})
    conv_vectors = np.array([vectors[[i for i, line in enumerate(lines) if line.conversation == c]].mean(axis=0)
                             for c in convs])
    out = []
    for per_topic in (1, 3):
        k = topics * per_topic
        by_message = KMeans(k, n_init=10, random_state=seed).fit_predict(vectors)
        by_conv = dict(zip(convs, KMeans(k, n_init=10, random_state=seed).fit_predict(conv_vectors)))
        for name, labels in ((f"k-means, {per_topic}/topic", by_message),
                             (f"k-means of conversations, {per_topic}/topic",
                              [by_conv[line.conversation] for line in lines])):
            out.append((name, scores(lines, {str(i): str(x) for i, x in enumerate(labels)})))
    return out


async def replay(cfg: MemorySection, embedder: Embedder, lines: list[ChatLine], folder: Path) -> tuple[dict, dict]:
    db = await open_database(folder / "memory.sqlite3")
    engine = MemoryEngine(db, embedder, cfg)
    try:
        await engine.start()
        messages = [MemoryMessage(SCOPE, "general", str(i), line.speaker, line.text, T0 + timedelta(seconds=20 * i))
                    for i, line in enumerate(lines)]
        await engine.ingest_many(messages)

        async def world_of() -> dict[str, str]:
            return {mid: wid for wid, mids in (await engine.messages_of(SCOPE)).items() for mid in mids}
        before = scores(lines, await world_of())
        await engine.maintain(SCOPE)
        after = scores(lines, await world_of())
        return before, after
    finally:
        await engine.close()
        await db.close()


def row(name: str, cfg: MemorySection, before: dict, after: dict) -> str:
    return (f"{name:<19} base {cfg.base_threshold:.2f} merge {cfg.merge_threshold:.2f} ctx {cfg.context_weight:.2f} "
            f"| before merge: {before['worlds']:>4} worlds, {before['per_topic']:5.1f}/topic, "
            f"purity {before['purity']:.3f}, NMI {before['nmi']:.3f} "
            f"| after: {after['worlds']:>4} worlds, {after['per_topic']:5.1f}/topic, "
            f"purity {after['purity']:.3f}, NMI {after['nmi']:.3f}")


async def run(args) -> None:
    config = load_config(args.config)
    convs = load_corpus(args.corpus, args.seed)
    if args.data == "held-out":
        convs = split_halves(convs, args.seed)[1]
    lines = with_fillers(chat_stream(convs, run=args.run, seed=args.seed), args.fillers, args.seed)
    embedder = Embedder.from_config(config.embedder)
    await embedder.embed(["warm up"])
    print(f"{args.corpus} {args.data}: {len(lines)} messages, {len(set(line.topic for line in lines))} topics, "
          f"{len(convs)} conversations, topic changes every {args.run} conversations, "
          f"{sum(line.text in FILLERS for line in lines)} filler replies")
    vectors = await embedder.embed([line.text for line in lines])
    for name, r in ceilings(lines, np.asarray(vectors), args.seed):
        print(f"offline {name:<36} {r['worlds']:>4} worlds, {r['per_topic']:5.1f}/topic, "
              f"purity {r['purity']:.3f}, NMI {r['nmi']:.3f}", flush=True)
    for name, cfg in rules(config.memory).items():
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            before, after = await replay(cfg, embedder, lines, Path(tmp))
        print(row(name, cfg, before, after), f"| {time.perf_counter() - t0:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="configuration file (default: ./config.toml)")
    parser.add_argument("--corpus", choices=CORPORA, default="chatterbot")
    parser.add_argument("--data", choices=["held-out", "all"], default="held-out",
                        help="the half of the corpus bench.calibrate did not see, or all of it")
    parser.add_argument("--run", type=int, default=3, help="conversations per topic before the channel moves on")
    parser.add_argument("--fillers", type=float, default=0.0,
                        help="share of messages followed by a reply like 'ok' or 'haha' (default 0)")
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
