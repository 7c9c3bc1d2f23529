"""What fitting chat text for search buys, keyword side only: FTS5 bm25 turn recall on LoCoMo
for the index and query before and after engine/memory/chattext.py, step by step, and what
fitting costs per message.

Each LoCoMo conversation (two speakers, ~600 turns, image captions, session dates) goes into an
in-memory FTS5 table shaped like one variant; each question with evidence turns is asked with that
variant's query; turn recall@k = share of a question's evidence turns among the top k, averaged.
Relative dates resolve against each session's date, captions stand for attachments.

    python -m bench.chattext --data DIR_OF_LOCOMO_JSON [--k 5 10]

LoCoMo (snap-research/locomo, CC BY-NC 4.0) is not redistributed here: point --data at a folder of
its per-conversation JSON files (speaker_a, session_N, session_N_date_time, qa).
"""
from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from bench.recall import plain_words
from engine.memory import textutil
from engine.memory.chattext import fit, searchable_text
from engine.memory.textutil import fts_query


def query_now(text: str) -> str | None:
    """textutil.fts_query written as a plain FTS5 expression (any of its tokens and phrases)."""
    query = fts_query(text)
    return " OR ".join('"' + " ".join(a) + '"' for a in query.alternatives) if query else None


def query_before(text: str, limit: int = 12) -> str | None:
    """textutil.fts_query as it was before chattext: content words, possessives kept."""
    terms = list(dict.fromkeys(plain_words(text)))[:limit]
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms) if terms else None


def query_without_verbs(text: str) -> str | None:
    saved, textutil.VERB_FORMS = textutil.VERB_FORMS, {}
    try:
        return query_now(text)
    finally:
        textutil.VERB_FORMS = saved


@dataclass(frozen=True)
class Variant:
    name: str
    tokenizer: str = "porter unicode61"
    speaker: bool = True          # the speaker's name in a column of its own
    fitted: bool = True           # captions and resolved dates in the text column
    weights: tuple[float, float] | None = None   # bm25 (speaker, text); None: equal
    query: Callable[..., str | None] = query_now
    tokens: bool = False          # the tokens the engine writes (chattext.fit), split at spaces


VARIANTS = [
    Variant("before: text only, unicode61, old query", "unicode61", False, False, query=query_before),
    Variant("+ new query (possessives, dates, verb forms)", "unicode61", False, False),
    Variant("+ porter stemming", speaker=False, fitted=False),
    Variant("+ speaker column", fitted=False),
    Variant("+ captions and resolved dates (shipped)"),
    Variant("shipped, speaker weight 0.25", weights=(0.25, 1.0)),
    Variant("shipped, speaker weight 2", weights=(2.0, 1.0)),
    Variant("shipped, without verb forms", query=query_without_verbs),
    Variant("tokens written by the engine (language, stems; migration 0026)", "ascii", tokens=True),
]


def session_time(text: str) -> datetime:
    return datetime.strptime(text.replace(",", ""), "%I:%M %p on %d %B %Y")


def turns(conv: dict) -> list[tuple[str, str, str, str, str]]:
    """(turn id, speaker, text, fitted text, search tokens) of a conversation, in order."""
    out = []
    for key in conv:
        if re.fullmatch(r"session_\d+", key):
            ts = session_time(conv[key + "_date_time"])
            for t in conv[key]:
                captions = (t["blip_caption"],) if t.get("blip_caption") else ()
                out.append((t["dia_id"], t["speaker"], t["text"], searchable_text(t["text"], ts, captions),
                            fit(t["speaker"], t["text"], ts, captions).terms))
    return out


def recall_at(variant: Variant, rows, questions, ks: list[int]) -> dict[int, list[float]]:
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE VIRTUAL TABLE f USING fts5(author, body, tokenize='{variant.tokenizer}')")
    con.executemany("INSERT INTO f(rowid, author, body) VALUES (?,?,?)",
                    [(i, "", r[4]) if variant.tokens
                     else (i, r[1] if variant.speaker else "", r[3] if variant.fitted else r[2])
                     for i, r in enumerate(rows)])
    rank = f"bm25(f, {variant.weights[0]}, {variant.weights[1]})" if variant.weights else "bm25(f)"
    out: dict[int, list[float]] = {k: [] for k in ks}
    for q in questions:
        match = variant.query(q["question"])
        ranked = [rows[r[0]][0] for r in con.execute(
            f"SELECT rowid FROM f WHERE f MATCH ? ORDER BY {rank} LIMIT ?", (match, max(ks)))] if match else []
        evidence = set(q["evidence"])
        for k in ks:
            out[k].append(len(evidence & set(ranked[:k])) / len(evidence))
    return out


def fit_cost(rows) -> tuple[float, float]:
    """p50 and p95 microseconds of searchable_text per message."""
    times = []
    for _, _, text, *_ in rows:
        t0 = time.perf_counter()
        searchable_text(text, datetime(2023, 5, 8), ())
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="folder of LoCoMo conversation JSON files")
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10])
    args = parser.parse_args()
    convs = [json.loads(p.read_text()) for p in sorted(args.data.glob("*.json"))]
    data = [(turns(c), [q for q in c["qa"] if q.get("evidence")]) for c in convs]
    n_turns, n_questions = sum(len(r) for r, _ in data), sum(len(q) for _, q in data)
    print(f"LoCoMo: {len(convs)} conversations, {n_turns} turns, {n_questions} questions with evidence")
    print("| index and query | " + " | ".join(f"turn recall@{k}" for k in args.k) + " |")
    print("|---|" + "---|" * len(args.k))
    for variant in VARIANTS:
        scores: dict[int, list[float]] = {k: [] for k in args.k}
        for rows, questions in data:
            for k, xs in recall_at(variant, rows, questions, args.k).items():
                scores[k] += xs
        print(f"| {variant.name} | " + " | ".join(f"{sum(scores[k]) / len(scores[k]):.3f}" for k in args.k) + " |")
    p50, p95 = fit_cost([r for rows, _ in data for r in rows])
    print(f"searchable_text per message: p50 {p50:.0f} us, p95 {p95:.0f} us ({n_turns} turns)")
    try:  # not a dependency: measured once to choose the approach (bench/RESULTS.md)
        from dateparser.search import search_dates
    except ImportError:
        return
    sample = [r[2] for rows, _ in data for r in rows][:200]
    search_dates("warm up yesterday", languages=["en"])  # loads its language data
    times = []
    for text in sample:
        t0 = time.perf_counter()
        search_dates(text, languages=["en"], settings={"RELATIVE_BASE": datetime(2023, 5, 8)})
        times.append((time.perf_counter() - t0) * 1e3)
    print(f"dateparser search_dates per message (for comparison, {len(sample)} turns): "
          f"p50 {statistics.median(times):.2f} ms, p95 {sorted(times)[int(len(times) * 0.95)]:.2f} ms")


if __name__ == "__main__":
    main()
