"""Derive memory.base_threshold and memory.merge_threshold for the configured embedding model.

Data: half of the conversations of each topic of the labelled chat corpus (bench.corpus; the
other half is held out for bench.routing), replayed as one channel that changes topic every
few conversations (two speakers taking turns in each: bench.corpus.speaker), embedded by the
engine's embedder as the engine embeds a message ("Speaker: text"). With several ``--language``s
(chatterbot-corpus in those languages), each language is its own channel and its topics are its
own, and the scores of all of them are pooled: one threshold for a multilingual model. With
``[memory] routing_centre`` (e5), every score is taken as routing takes it (router.centred): with
the mean direction of the language's messages (the scope's centre, once it has settled) projected
out of both vectors.

Base threshold (message -> world). For every contentful message (short ones follow the
channel's world and are left out), the routing vector is built exactly as the engine builds it
(the message blended with the channel's recent messages). Its cosine to the centroid of its
own topic (leave-one-out) is a "related" score, its cosine to every other topic's centroid an
"unrelated" one. The base threshold is the equal-error point: the threshold at which the
share of related scores below it equals the share of unrelated scores above it.

Merge threshold (world <-> world). Each topic's messages are split at random into two halves,
20 times over; the cosine between the two halves' centroids is a "same topic" score, between
halves of different topics a "different topics" score. A wrong merge mixes two topics for good
while a missed one costs one extra world, so the merge threshold is the 99th percentile of the
different-topics scores (1% of unrelated pairs would merge).

    python -m bench.calibrate [--config config.toml] [--corpus chatterbot|bbc] [--language english ...] [--seed 0]
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from bench.corpus import CORPORA, LANGUAGES, chat_stream, load_corpus, split_halves
from engine.config import MemorySection, load_config
from engine.embedder import Embedder
from engine.memory import router

MERGE_PERCENTILE = 99.0
SPLITS = 20
PCTS = (5, 25, 50, 75, 95)


def routing_vectors(cfg: MemorySection, texts: list[str], vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The engine's routing vector for each message of one channel, and which messages are short."""
    recent: list[np.ndarray] = []
    out, short = [], []
    for text, vec in zip(texts, vecs):
        context = recent[-cfg.context_messages:] if cfg.context_messages else []
        out.append(router.routing_vector(cfg, vec, context))
        is_short = router.is_short(cfg, text)
        short.append(is_short)
        if not is_short:
            recent.append(vec)
    return np.asarray(out), np.asarray(short)


def equal_error(related: np.ndarray, unrelated: np.ndarray) -> tuple[float, float, float]:
    """(threshold, share of related below it, share of unrelated at or above it) at equal error."""
    grid = np.round(np.arange(-0.2, 1.0, 0.005), 3)
    miss = np.array([(related < t).mean() for t in grid])
    false = np.array([(unrelated >= t).mean() for t in grid])
    i = int(np.argmin(np.abs(miss - false)))
    return float(grid[i]), float(miss[i]), float(false[i])


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def message_scores(query: np.ndarray, raw: np.ndarray, topics: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Related and unrelated scores, and the share of messages nearest to their own topic's
    centroid: what a classifier that knew the topics would get right, a ceiling for purity."""
    sums = {t: raw[topics == t].sum(0) for t in np.unique(topics)}
    counts = {t: int((topics == t).sum()) for t in sums}
    related, unrelated, right = [], [], 0
    for q, v, t in zip(query, raw, topics):
        if counts[t] < 2:   # leave-one-out needs another message of its topic
            continue
        own = float(q @ unit(sums[t] - v))
        related.append(own)
        others = [float(q @ unit(s)) for u, s in sums.items() if u != t]
        unrelated += others
        right += own > max(others)
    return np.asarray(related), np.asarray(unrelated), right / max(len(related), 1)


def merge_scores(raw: np.ndarray, topics: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    same, different = [], []
    names = [t for t in np.unique(topics) if (topics == t).sum() >= 4]
    for _ in range(SPLITS):
        halves = {}
        for t in names:
            idx = rng.permutation(np.flatnonzero(topics == t))
            mid = len(idx) // 2
            halves[t] = (unit(raw[idx[:mid]].sum(0)), unit(raw[idx[mid:]].sum(0)))
            same.append(halves[t][0] @ halves[t][1])
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                different += [halves[a][0] @ halves[b][0], halves[a][1] @ halves[b][1]]
    return np.asarray(same), np.asarray(different)


def pcts(x: np.ndarray) -> str:
    return " ".join(f"p{p}={v:.3f}" for p, v in zip(PCTS, np.percentile(x, PCTS)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="configuration file (default: ./config.toml)")
    parser.add_argument("--corpus", choices=CORPORA, default="chatterbot")
    parser.add_argument("--language", nargs="+", choices=LANGUAGES, default=["english"],
                        help="chatterbot-corpus languages, pooled (default: english)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = load_config(args.config)
    cfg = config.memory
    embedder = Embedder.from_config(config.embedder)

    parts, conversations = [], 0
    for language in args.language:
        calib, _ = split_halves(load_corpus(args.corpus, args.seed, language), args.seed)
        lines = chat_stream(calib, seed=args.seed)
        texts = [line.text for line in lines]
        raw_l = embedder.encode([embedder.turn(line.speaker, line.text) for line in lines])
        query_l, short_l = routing_vectors(cfg, texts, raw_l)   # one channel per language
        if cfg.routing_centre:   # project the language's mean direction out (linear: sums stay sums)
            u = unit(raw_l.mean(axis=0))
            raw_l, query_l = (x - np.outer(x @ u, u) for x in (raw_l, query_l))
            query_l = query_l / np.linalg.norm(query_l, axis=1, keepdims=True)
        parts.append((raw_l, query_l, short_l, [f"{language}:{line.topic}" for line in lines]))
        conversations += len(calib)
    raw, query, short = (np.concatenate([p[i] for p in parts]) for i in range(3))
    topics = np.array([t for p in parts for t in p[3]])
    print(f"model {config.embedder.model} (dim {raw.shape[1]}); {args.corpus} {'+'.join(args.language)}, "
          f"{len(set(topics))} topics, calibration half: {conversations} conversations, {len(topics)} messages, "
          f"{int(short.sum())} short")
    print(f"routing vector: context_messages={cfg.context_messages}, context_weight={cfg.context_weight}")

    keep = ~short
    for name, q in (("raw message", raw[keep]), ("routing vector", query[keep])):
        related, unrelated, ceiling = message_scores(q, raw[keep], topics[keep])
        t, miss, false = equal_error(related, unrelated)
        print(f"\nmessage -> topic centroid, {name}:")
        print(f"  related   ({len(related):>5}): {pcts(related)}")
        print(f"  unrelated ({len(unrelated):>5}): {pcts(unrelated)}")
        print(f"  equal-error point {t:.3f}: {miss:.1%} of related below, {false:.1%} of unrelated above")
        print(f"  nearest topic centroid is the message's own topic for {ceiling:.1%} (supervised ceiling)")
    base = round(t, 2)

    same, different = merge_scores(raw, topics, args.seed)
    merge = math.ceil(float(np.percentile(different, MERGE_PERCENTILE)) * 100) / 100
    print(f"\ncentroid <-> centroid of random halves ({SPLITS} splits):")
    print(f"  same topic       ({len(same):>5}): {pcts(same)}")
    print(f"  different topics ({len(different):>5}): {pcts(different)} max={different.max():.3f}")
    print(f"  p{MERGE_PERCENTILE:.0f} of different topics = {merge:.2f}: "
          f"{(same >= merge).mean():.1%} of same-topic pairs would merge, "
          f"{(different >= merge).mean():.1%} of different-topic pairs")

    print("\n[memory]  # derived by `python -m bench.calibrate`")
    print(f"base_threshold = {base:.2f}   # equal-error point of routing vector -> topic centroid")
    print(f"merge_threshold = {merge:.2f}  # p{MERGE_PERCENTILE:.0f} of different-topic centroid pairs")


if __name__ == "__main__":
    main()
