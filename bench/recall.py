"""Recall benchmark: does memory return the turns that answer a question?

Each dialogue (a LoCoMo conversation, or a synthetic chat of bench.recall_synth) is imported
into a scope of its own through the product's import path (``MemoryEngine.ingest_many``, as
`python -m bot import` does: one message per turn, author = speaker, message id = turn id,
time = session time + 10 s per turn, attachments = the image caption), in a fresh database,
without an LLM. Then every question is asked, at each k, five ways over the same turns:

* ``ours``: ``MemoryEngine.recall(scope, question, k)``, its messages as returned (neighbour
  turns count towards k, as they are part of what recall returns);
* ``bm25``: plain BM25 (rank-bm25's Okapi, k1 1.5, b 0.75) over each turn's text and caption,
  tokenised into content words (engine.memory.textutil), top k;
* ``keyword``: the product's keyword side alone (engine.memory.keyword_sql: BM25 over the
  indexed tokens, within the scope), top k;
* ``trigram``: the same BM25 as ``bm25`` over each turn's character trigrams (lower-cased, spaces
  kept), a keyword baseline that needs no word boundaries (Thai is written without spaces);
* ``cosine``: the embedding model's cosine alone (the product's embedder, same model and backend)
  between the question and each turn as memory embeds it (e5: "Speaker: text"), exact, top k (the
  turn vectors are those memory computed at import, recorded on the way).

Figures per method and k: turn recall (share of a question's evidence turns returned, averaged
over questions), hit rate (at least one evidence turn returned), session hit (a returned turn
from the session, or for the synthetic chats the day, of an evidence turn) and, for ours, the
wall time of each recall call (query embedding included) p50/p95.

``--languages``: the same evidence-labelled chats in English, Portuguese and Thai
(bench.recall_languages), each language measured on its own. ``--models``: several embedding
models side by side in one run, each with its own calibrated thresholds.

    nice -n 10 python -m bench.recall --locomo PATH [--conversations N] [--k 5 10] [--models M ...]
    nice -n 10 python -m bench.recall --synthetic [--seed S]
    nice -n 10 python -m bench.recall --languages [--seed S] [--models M ...]
    nice -n 10 python -m bench.recall --locomo PATH --backends sqlite postgresql [sqlite-each]

``--backends``: the same dialogues imported into each database in turn (PostgreSQL: a server
started for the run, as bench.storage_backends does), figures side by side, and how often the
first database's keyword top k agree with each other's. ``sqlite-each`` gives every dialogue a
SQLite database of its own: FTS5 weighs words by the whole database, PostgreSQL by the asking
scope, so this is SQLite ranking each scope as if it were alone.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

from bench.recall_data import DataError, Dialogue, load_locomo
from engine.config import load_config, parse_config
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage
from engine.memory.audience import Viewer
from engine.memory.keyword_sql import keyword_messages
from engine.memory.textutil import STOP_WORDS, fts_query, words
from engine.services import build_services

METHODS = ("ours", "keyword", "bm25", "trigram", "cosine")


# -- metrics -------------------------------------------------------------------------------

def turn_recall(returned: list[str], evidence: tuple[str, ...] | list[str]) -> float:
    """Share of the evidence turns among those returned."""
    wanted = set(evidence)
    return len(wanted & set(returned)) / len(wanted) if wanted else 0.0


def hit(returned: list[str], evidence: tuple[str, ...] | list[str]) -> float:
    """1.0 when at least one evidence turn was returned."""
    return 1.0 if set(evidence) & set(returned) else 0.0


def session_hit(returned: list[str], evidence: tuple[str, ...] | list[str], session_of: dict[str, str]) -> float:
    """1.0 when a returned turn comes from the session (day) of an evidence turn."""
    wanted = {session_of[e] for e in evidence if e in session_of}
    return 1.0 if wanted & {session_of[r] for r in returned if r in session_of} else 0.0


@dataclass
class Tally:
    """One method at one k: a row per question, and recall's latencies."""
    turn: list[float] = field(default_factory=list)
    hit: list[float] = field(default_factory=list)
    session: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    by_category: dict[str, list[float]] = field(default_factory=dict)

    def add(self, returned: list[str], evidence, session_of: dict[str, str], category: str) -> None:
        self.turn.append(turn_recall(returned, evidence))
        self.hit.append(hit(returned, evidence))
        self.session.append(session_hit(returned, evidence, session_of))
        self.returned.append(len(returned))
        self.by_category.setdefault(category, []).append(self.turn[-1])

    def summary(self) -> dict:
        out = {"questions": len(self.turn), "turn_recall": _mean(self.turn), "hit_rate": _mean(self.hit),
               "session_hit": _mean(self.session), "returned_mean": _mean(self.returned),
               "turn_recall_by_category": {c: _mean(v) for c, v in sorted(self.by_category.items())}}
        if self.ms:
            out["p50_ms"], out["p95_ms"] = float(np.percentile(self.ms, 50)), float(np.percentile(self.ms, 95))
        return out


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else 0.0


# -- baselines -----------------------------------------------------------------------------

def plain_words(text: str) -> list[str]:
    """The baselines' words: split at what is not a letter, English stop words left out (no
    segmentation, no stemming, no other language's stop words: what a plain BM25 sees)."""
    return [w for w in words(text) if len(w) > 1 and w not in STOP_WORDS]


class Bm25Baseline:
    """Plain BM25 over one dialogue's turns (text and caption)."""

    def __init__(self, ids: list[str], docs: list[str]):
        self.ids = ids
        self.index = BM25Okapi([plain_words(d) or ["\x00"] for d in docs])

    def top(self, query: str, k: int) -> list[str]:
        terms = plain_words(query)
        if not terms:
            return []
        scores = self.index.get_scores(terms)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in order if scores[i] > 0]


def trigrams(text: str) -> list[str]:
    padded = f" {' '.join(text.lower().split())} "
    return [padded[i:i + 3] for i in range(len(padded) - 2)]


class TrigramBaseline(Bm25Baseline):
    """BM25 over character trigrams: no word boundaries needed."""

    def __init__(self, ids: list[str], docs: list[str]):
        self.ids = ids
        self.index = BM25Okapi([trigrams(d) or ["\x00"] for d in docs])

    def top(self, query: str, k: int) -> list[str]:
        scores = self.index.get_scores(trigrams(query))
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in order if scores[i] > 0]


class CosineBaseline:
    """Exact cosine between unit vectors: the question's and each turn's."""

    def __init__(self, ids: list[str], vectors: np.ndarray):
        self.ids, self.vectors = ids, vectors

    def top(self, query: np.ndarray, k: int) -> list[str]:
        order = np.argsort(-(self.vectors @ query), kind="stable")[:k]
        return [self.ids[i] for i in order]


class RecordingEmbedder(Embedder):
    """The product's embedder, unchanged, that also keeps every vector it computed, so the cosine
    baseline scores the very vectors memory stored without embedding the turns twice."""

    def __init__(self, base: Embedder):
        super().__init__(base.model_name, base.batch_size, base.device, base.backend)
        self.seen: dict[str, np.ndarray] = {}

    async def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        vectors = await super().embed(texts, kind)
        if kind == "passage":
            self.seen.update(zip(texts, vectors))
        return vectors

    async def recorded(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` as recorded, computing only those never embedded."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.seen))
        if missing:
            await self.embed(missing)
        return np.stack([self.seen[t] for t in texts])


EACH = "sqlite-each"   # --backends: one SQLite database per dialogue


# -- the run -------------------------------------------------------------------------------

def scope_of(dialogue: Dialogue) -> str:
    return f"bench:{dialogue.name}"


def messages_of(dialogue: Dialogue) -> list[MemoryMessage]:
    scope = scope_of(dialogue)
    return [MemoryMessage(scope, t.channel, t.id, t.speaker, t.text, t.ts,
                          attachments=(t.caption,) if t.caption else ()) for t in dialogue.turns]


def document(turn) -> str:
    return turn.text if not turn.caption or turn.caption == turn.text else f"{turn.text} {turn.caption}"


async def keyword_top(engine: MemoryEngine, scope: str, question: str, k: int) -> list[str]:
    """The turn ids of the product's keyword search alone, best first."""
    hits = await keyword_messages(engine.db, Viewer.operator(scope), fts_query(question), k)
    if not hits:
        return []
    ids = {r["id"]: r["message_id"] for r in await engine.db.fetchall(
        f"SELECT id, message_id FROM memory_messages WHERE id IN ({','.join('?' * len(hits))})", [i for i, _ in hits])}
    return [ids[i] for i, _ in hits]


async def evaluate(engine: MemoryEngine, embedder: RecordingEmbedder, dialogues: list[Dialogue], ks: list[int],
                   log=print, keyword_log: list | None = None,
                   tallies: dict[tuple[str, int], Tally] | None = None) -> dict[tuple[str, int], Tally]:
    """Import every dialogue into its own scope, then ask every question each way at each k
    (the keyword top k of each question is appended to ``keyword_log`` when given), adding to
    ``tallies`` when given (dialogues evaluated in several databases, one table)."""
    tallies = tallies if tallies is not None else {(m, k): Tally() for m in METHODS for k in ks}
    for d in dialogues:
        t0 = time.perf_counter()
        await engine.ingest_many(messages_of(d))
        await engine.flush()
        worlds = len(await engine.worlds(scope_of(d)))
        ids = [t.id for t in d.turns]
        bm25 = Bm25Baseline(ids, [document(t) for t in d.turns])
        trigram = TrigramBaseline(ids, [document(t) for t in d.turns])
        cosine = CosineBaseline(ids, await embedder.recorded([embedder.turn(t.speaker, t.text) for t in d.turns]))
        qvecs = (await embedder.embed([q.text for q in d.questions], kind="query") if d.questions
                 else np.zeros((0, 0)))
        t1 = time.perf_counter()
        for q, qvec in zip(d.questions, qvecs):
            for k in ks:
                started = time.perf_counter()
                result = await engine.recall(scope_of(d), q.text, k)
                tallies["ours", k].ms.append((time.perf_counter() - started) * 1000)
                tallies["ours", k].add([e.message_id for e in result.evidence], q.evidence, d.session_of, q.category)
                by_keyword = await keyword_top(engine, scope_of(d), q.text, k)
                if keyword_log is not None:
                    keyword_log.append(by_keyword)
                tallies["keyword", k].add(by_keyword, q.evidence, d.session_of, q.category)
                tallies["bm25", k].add(bm25.top(q.text, k), q.evidence, d.session_of, q.category)
                tallies["trigram", k].add(trigram.top(q.text, k), q.evidence, d.session_of, q.category)
                tallies["cosine", k].add(cosine.top(qvec, k), q.evidence, d.session_of, q.category)
        log(f"{d.name}: {len(d.turns)} turns in {worlds} worlds (import {t1 - t0:.0f} s), "
            f"{len(d.questions)} questions ({d.dropped} left out) in {time.perf_counter() - t1:.0f} s")
    return tallies


def table(tallies: dict[tuple[str, int], Tally], ks: list[int]) -> list[str]:
    lines = ["| k | method | turn recall | hit rate | session hit | returned | recall p50 / p95 ms |",
             "|---|---|---|---|---|---|---|"]
    for k in ks:
        for m in METHODS:
            s = tallies[m, k].summary()
            ms = f"{s['p50_ms']:.1f} / {s['p95_ms']:.1f}" if "p50_ms" in s else ""
            lines.append(f"| {k} | {m} | {s['turn_recall']:.3f} | {s['hit_rate']:.3f} | {s['session_hit']:.3f} "
                         f"| {s['returned_mean']:.1f} | {ms} |")
        ours, bm25 = tallies["ours", k].summary(), tallies["bm25", k].summary()
        if bm25["turn_recall"]:
            lines.append(f"| {k} | ours / bm25 | x{ours['turn_recall'] / bm25['turn_recall']:.2f} | | | | |")
    cats = sorted(tallies[METHODS[0], ks[0]].by_category)
    lines += ["", f"Turn recall by question category at k={ks[0]}:", "",
              "| category | questions | " + " | ".join(METHODS) + " |", "|---|---|" + "---|" * len(METHODS)]
    for c in cats:
        row = [tallies[m, ks[0]].by_category[c] for m in METHODS]
        lines.append(f"| {c} | {len(row[0])} | " + " | ".join(f"{_mean(v):.3f}" for v in row) + " |")
    return lines


async def run(dialogues: list[Dialogue], args, model: str | None = None) -> dict:
    config = load_config(args.config)
    if model is not None:   # that model with its own calibrated thresholds
        config = parse_config({"embedder": {**config.embedder.model_dump(), "model": model}})
    embedder = RecordingEmbedder(Embedder.from_config(config.embedder))
    await embedder.embed(["warm up"])
    out: dict = {}
    tops: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        try:
            for backend in args.backends:
                tops[backend] = []
                tallies = None
                t0 = time.perf_counter()
                for i, group in enumerate([[d] for d in dialogues] if backend == EACH else [dialogues]):
                    url: str | Path
                    if backend == "postgresql":
                        from bench.storage_backends import postgres_url
                        server, url = await postgres_url(str(Path(tmp) / "pg"))
                    else:
                        url = Path(tmp) / f"recall-{backend}-{i}.sqlite3"
                    services = build_services(config, await open_database(url), llm=False, sims=False,
                                              embedder=embedder)
                    try:
                        await services.start(jobs=False)
                        tallies = await evaluate(services.memory, embedder, group, args.k,
                                                 lambda line: print(line, file=sys.stderr), tops[backend], tallies)
                    finally:
                        await services.close()
                assert tallies is not None
                turns, questions = sum(len(d.turns) for d in dialogues), sum(len(d.questions) for d in dialogues)
                print(f"model {config.embedder.model}, {backend}: {len(dialogues)} dialogues "
                      f"({', '.join(d.name for d in dialogues)}), {turns} turns, {questions} questions; "
                      f"{time.perf_counter() - t0:.0f} s\n")
                print("\n".join(table(tallies, args.k)) + "\n")
                out[backend] = {f"{m}@{k}": t.summary() for (m, k), t in tallies.items()}
        finally:
            if server is not None:
                server.cleanup()
    first, *others = tops
    for other in others:
        a, b = tops[first], tops[other]
        same = sum(x == y for x, y in zip(a, b)) / max(len(a), 1)
        overlap = _mean([len(set(x) & set(y)) / max(len(set(x) | set(y)), 1) for x, y in zip(a, b)])
        print(f"keyword top k, {first} vs {other}: identical lists {same:.3f}, mean overlap (Jaccard) {overlap:.3f}")
        for k in args.k:
            x, y = (out[backend][f"keyword@{k}"]["turn_recall"] for backend in (first, other))
            u, v = (out[backend][f"ours@{k}"]["turn_recall"] for backend in (first, other))
            print(f"k={k}: keyword turn recall {x:.3f} vs {y:.3f} ({(y - x) / x:+.1%}); "
                  f"ours {u:.3f} vs {v:.3f} ({(v - u) / u:+.1%})")
    return out if len(out) > 1 else next(iter(out.values()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--locomo", type=Path, metavar="PATH",
                        help="LoCoMo's locomo10.zip, its extracted folder, or locomo10.json")
    source.add_argument("--synthetic", action="store_true", help="the synthetic chats of bench.recall_synth")
    source.add_argument("--languages", action="store_true",
                        help="the same chats in English, Portuguese and Thai (bench.recall_languages)")
    parser.add_argument("--conversations", type=int, help="only the first N LoCoMo conversations (by file name)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic chats: random seed")
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--backends", nargs="+", choices=("sqlite", "postgresql", EACH), default=["sqlite"],
                        help=f"databases to import into, one after the other (default: sqlite; {EACH}: a SQLite "
                             "database of its own for each dialogue)")
    parser.add_argument("--config", help="configuration file (default: ./config.toml)")
    parser.add_argument("--models", nargs="+", metavar="MODEL",
                        help="embedding models to compare in this run (default: the configured one)")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.languages:
        from bench.recall_languages import LANGUAGES, dialogues as language_dialogues
        sets = {language: language_dialogues(language, args.seed) for language in LANGUAGES}
    elif args.synthetic:
        from bench.recall_synth import synthetic_dialogues
        sets = {"synthetic": synthetic_dialogues(args.seed)}
    else:
        try:
            sets = {"locomo": load_locomo(args.locomo, args.conversations)}
        except (DataError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    figures = {}
    for model in args.models or [None]:
        for name, dialogues in sets.items():
            print(f"\n### {name}\n")
            figures[f"{model or 'configured'}/{name}"] = asyncio.run(run(dialogues, args, model))
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
