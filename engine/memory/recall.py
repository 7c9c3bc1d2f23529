"""Hybrid recall inside one world: vector similarity and full-text (FTS5 bm25) rankings of its
beliefs and messages, fused by reciprocal rank."""
from __future__ import annotations

import numpy as np

from engine.db import Database
from engine.memory.beliefs import BELIEF_COLUMNS, belief_from_row
from engine.memory.models import Belief, Evidence, RecallResult, parse_ts
from engine.memory.textutil import fts_query

RRF_K = 60              # the usual reciprocal-rank-fusion constant
VECTOR_WINDOW = 2000    # newest messages of a world scored by vector (FTS covers them all)
KEYWORD_LIMIT = 50


def fuse(*rankings: list[int]) -> list[int]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(scores, key=lambda i: -scores[i])


def _vector_ranking(rows, query: np.ndarray, limit: int) -> list[int]:
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    sims = matrix @ query
    order = np.argsort(-sims)[:limit]
    return [rows[i]["id"] for i in order]


def evidence_from_row(row) -> Evidence:
    return Evidence(id=row["id"], world_id=row["world_id"], channel=row["channel"], message_id=row["message_id"],
                    author=row["author"], text=row["text"], ts=parse_ts(row["ts"]))


async def _hybrid(db: Database, vector_rows, query: np.ndarray, text: str, keyword_sql: str, world_id: str,
                  k: int, select_sql: str, convert) -> list:
    """Fuse the vector ranking of ``vector_rows`` with an FTS5 keyword ranking, then load the top k."""
    by_vector = _vector_ranking(vector_rows, query, KEYWORD_LIMIT)
    by_words: list[int] = []
    match = fts_query(text)
    if match:
        by_words = [r["id"] for r in await db.fetchall(keyword_sql, (match, world_id, KEYWORD_LIMIT))]
    ids = fuse(by_vector, by_words)[:k]
    if not ids:
        return []
    rows = await db.fetchall(f"{select_sql} WHERE id IN ({','.join('?' * len(ids))})", ids)
    found = {r["id"]: convert(r) for r in rows}
    return [found[i] for i in ids if i in found]


async def rank_beliefs(db: Database, world_id: str, query: np.ndarray, text: str, k: int) -> list[Belief]:
    rows = await db.fetchall("SELECT id, embedding FROM beliefs WHERE world_id=? AND invalid_at IS NULL",
                             (world_id,))
    return await _hybrid(
        db, rows, query, text,
        "SELECT b.id FROM beliefs_fts JOIN beliefs b ON b.id = beliefs_fts.rowid "
        "WHERE beliefs_fts MATCH ? AND b.world_id=? AND b.invalid_at IS NULL ORDER BY bm25(beliefs_fts) LIMIT ?",
        world_id, k, f"SELECT {BELIEF_COLUMNS} FROM beliefs", belief_from_row)


async def rank_evidence(db: Database, world_id: str, query: np.ndarray, text: str, k: int) -> list[Evidence]:
    rows = await db.fetchall("SELECT id, embedding FROM memory_messages WHERE world_id=? ORDER BY id DESC LIMIT ?",
                             (world_id, VECTOR_WINDOW))
    return await _hybrid(
        db, rows, query, text,
        "SELECT m.id FROM memory_messages_fts JOIN memory_messages m ON m.id = memory_messages_fts.rowid "
        "WHERE memory_messages_fts MATCH ? AND m.world_id=? ORDER BY bm25(memory_messages_fts) LIMIT ?",
        world_id, k, "SELECT id, world_id, channel, message_id, author, text, ts FROM memory_messages",
        evidence_from_row)


def ask_prompt(question: str, result: RecallResult) -> list[dict]:
    facts = "\n".join(f"[B{b.id}] {b.text()} (confidence {b.confidence:.2f})" for b in result.beliefs)
    msgs = "\n".join(f"[M{e.id}] {e.author} ({e.ts:%Y-%m-%d}): {e.text}" for e in result.evidence)
    topic = result.world.topic if result.world else ""
    return [
        {"role": "system", "content":
            "Answer the question using ONLY the beliefs and messages below, which come from one topic of "
            "this chat's memory. Cite every claim with its tag, like [B12] or [M40]. If they do not contain "
            "the answer, say that the memory does not hold it. Be brief."},
        {"role": "user", "content":
            f"Topic: {topic}\nBeliefs:\n{facts or '(none)'}\nMessages:\n{msgs or '(none)'}\n\nQuestion: {question}"},
    ]
