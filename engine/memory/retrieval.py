"""Recall over the whole scope a viewer sees: hybrid search of messages and beliefs, a
relevance floor, neighbour turns, and the world lookups the memory commands show.

Why scope-wide: a question rarely routes to the world that holds its answer (measured on
LoCoMo: recall inside the routed world found 0.19 of the evidence turns, plain BM25 over all
messages 0.47). So candidates come from every world the viewer sees: BM25 over all its
messages and beliefs (the scope's own statistics, on both databases: engine.memory.keyword_sql), and the
nearest message and belief vectors (engine.memory.message_index),
fused by score: vector_weight x cosine + keyword_weight x bm25 / the query's best bm25.
Measured on two LoCoMo conversations (turn recall at k=5, before chat-text search): this
fusion 0.501, reciprocal-rank fusion of the same rankings 0.363, bm25 alone 0.411, cosine
alone 0.164; with chat-text search 0.630 vs bm25 0.538 (bench/RESULTS.md). Worlds are
context and a small ranking signal (a message gains world_bonus x its world's centroid cosine
when that world is among the nearest to the query), never a filter.

The relevance floor: a query is answered only when some message or belief shares a search term
with it (a bm25 match: a name, a resolved date, an attachment caption the text's vector knows
nothing of) or its best candidate is at least ``recall_floor`` similar to it (the question
embedded as a query, the messages as passages; the floor is the embedding model's, as cosines
of different models are not comparable); otherwise memory holds nothing about it
(RecallResult.found is False) and ``ask`` makes no LLM call.

Privacy: every read here filters by the viewer (``viewer.where``, handed to the statements of
the tables' owners, engine.memory.records and engine.memory.beliefs), and the vector index is
searched only in the audiences the viewer sees; rows it returns are loaded again through that
filter.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from engine.db import Database
from engine.memory import beliefs as belief_store, records
from engine.memory.audience import Viewer, message_audience
from engine.memory.index import CentroidIndex
from engine.memory.keyword_sql import keyword_beliefs, keyword_messages
from engine.memory.message_index import MessageIndex
from engine.memory.models import Belief, Evidence, RecallResult, WorldInfo, from_blob, maturity, parse_ts
from engine.memory.scope_cache import in_use
from engine.memory.textutil import fts_query
from engine.offload import run_cpu

MAX_QUERY_CHARS = 2000     # longer search input is cut here, before it reaches SQL or the embedder
CANDIDATES = 50            # per ranking (keyword, vector) before fusion
NEAR_WORLDS = 3            # worlds nearest the query whose messages get the world bonus
RECENT_MESSAGES = 10       # shown by /world for a world without beliefs


@dataclass(frozen=True)
class Tuning:
    """The recall knobs of [memory] (engine.config.MemorySection)."""
    floor: float = 0.30            # best candidate's cosine below this, and no keyword match: nothing found
    keyword_weight: float = 1.0    # weight of bm25, relative to the query's best match
    vector_weight: float = 1.0     # weight of cosine similarity
    world_bonus: float = 0.1       # x the cosine of the message's world, for the worlds nearest the query
    neighbours: int = 1            # turns a hit may bring along (0: none)
    neighbour_window_s: float = 300.0
    zone: str = "UTC"              # where relative dates in a question are read ([memory] timezone)

    @classmethod
    def of(cls, cfg) -> "Tuning":
        return cls(cfg.recall_floor, cfg.recall_keyword_weight, cfg.recall_vector_weight, cfg.recall_world_bonus,
                   cfg.recall_neighbours, cfg.recall_neighbour_window_s, cfg.timezone)


def cap(text: str) -> str:
    return text[:MAX_QUERY_CHARS]


def fused(cosine: float, bm25: float, best_bm25: float, tuning: "Tuning") -> float:
    """One candidate's relevance: its cosine plus its bm25 relative to the query's best match."""
    return tuning.vector_weight * cosine + tuning.keyword_weight * (bm25 / best_bm25 if best_bm25 > 0 else 0.0)


# -- candidates --------------------------------------------------------------------------

async def nearest_worlds(indexes: dict[str, CentroidIndex], viewer: Viewer, query: np.ndarray,
                         n: int = NEAR_WORLDS) -> list[tuple[str, float]]:
    """The ``n`` world centroids nearest the query among the audiences the viewer sees."""
    hits = [hit for audience, index in indexes.items() if viewer.sees(audience) for hit in index.search(query, n)]
    return sorted(hits, key=lambda h: -h[1])[:n]


def evidence_from_row(row, score: float = 0.0, neighbour_of: int | None = None) -> Evidence:
    return Evidence(id=row["id"], world_id=row["world_id"], channel=row["channel"], message_id=row["message_id"],
                    author=row["author"], text=row["text"], ts=parse_ts(row["ts"]), score=score,
                    world_topic=row["topic"], neighbour_of=neighbour_of)


async def load_messages(db: Database, viewer: Viewer, ids: list[int]) -> dict[int, Any]:
    """id -> row (with its embedding: None while pending), for the ids that exist in the scope and
    that the viewer sees."""
    if not ids:
        return {}
    sees, seen = viewer.where(message_audience())
    return {r["id"]: r for r in await records.recalled(db, viewer.scope, ids, sees, seen)}


# -- neighbour turns ---------------------------------------------------------------------

def _asks(text: str) -> bool:
    return text.rstrip().endswith("?")


async def adjacent_turns(db: Database, viewer: Viewer, hits: list) -> dict[int, tuple]:
    """hit id -> (the turn after it, the turn before it) in its channel, each None when there is
    none the viewer may read; two statements for all hits."""
    if not hits:
        return {}
    pairs = await records.adjacent_ids(db, viewer.scope, [(hit["channel"], hit["id"]) for hit in hits])
    rows = await load_messages(db, viewer, [i for pair in pairs for i in pair if i is not None])
    return {hit["id"]: tuple(None if i is None else rows.get(i) for i in pair) for hit, pair in zip(hits, pairs)}


def completes(hit, turn, after: bool, window_s: float) -> bool:
    """A turn completes a hit when someone else says it within ``window_s`` and it answers the
    hit's question (after) or asks the question the hit answers (before)."""
    if turn is None or turn["author"] == hit["author"]:
        return False
    gap = abs((parse_ts(turn["ts"]) - parse_ts(hit["ts"])).total_seconds())
    return gap <= window_s and _asks(hit["text"] if after else turn["text"])


# -- recall ------------------------------------------------------------------------------

async def rank_messages(db: Database, index: MessageIndex, viewer: Viewer, query: np.ndarray,
                        words: dict[int, float], near: dict[str, float], tuning: Tuning
                        ) -> tuple[list[tuple[Any, float]], float]:
    """Messages best first as (row, fused score), and the best cosine among the candidates
    (``words``: the bm25 matches, id -> score)."""
    by_vector = await index.search(db, viewer, query, CANDIDATES)
    rows = await load_messages(db, viewer, list(dict.fromkeys([i for i, _ in by_vector] + list(words))))
    cosines = {mid: float(from_blob(row["embedding"]) @ query) if row["embedding"] is not None else 0.0
               for mid, row in rows.items()}   # a pending message is found by its words only
    scores = {mid: fused(cosines[mid], words.get(mid, 0.0), max(words.values(), default=1.0), tuning)
              + tuning.world_bonus * max(near.get(row["world_id"], 0.0), 0.0) for mid, row in rows.items()}
    ranked = sorted(scores, key=lambda mid: -scores[mid])
    return [(rows[mid], scores[mid]) for mid in ranked], max(cosines.values(), default=0.0)


async def load_beliefs(db: Database, viewer: Viewer, ids: list[int]) -> dict[int, Any]:
    """id -> row (with its embedding) of the current beliefs among ``ids`` that the viewer sees."""
    if not ids:
        return {}
    sees, seen = viewer.where("w.audience")
    return {r["id"]: r for r in await belief_store.candidates(db, viewer.scope, ids, sees, seen)}


async def rank_beliefs(db: Database, index: MessageIndex, viewer: Viewer, query: np.ndarray,
                       words: dict[int, float], k: int, tuning: Tuning) -> tuple[list[Belief], float]:
    """The ``k`` best active beliefs, and the best cosine among the candidates. Superseded beliefs
    stay in the vector index, so it is asked for twice as many."""
    by_vector = await index.search(db, viewer, query, 2 * CANDIDATES, "beliefs")
    rows = await load_beliefs(db, viewer, list(dict.fromkeys([i for i, _ in by_vector] + list(words))))
    cosines = {i: float(from_blob(row["embedding"]) @ query) for i, row in rows.items()}
    scores = {i: fused(cosines[i], words.get(i, 0.0), max(words.values(), default=1.0), tuning) for i in rows}
    found = []
    for i in sorted(scores, key=lambda i: -scores[i])[:k]:
        belief = belief_store.belief_from_row(rows[i])
        belief.score = scores[i]
        found.append(belief)
    return found, max(cosines.values(), default=0.0)


async def with_neighbours(db: Database, viewer: Viewer, ranked: list[tuple[Any, float]], k: int,
                          tuning: Tuning) -> list[Evidence]:
    """The top hits, each followed by the turns that complete it, ``k`` messages in all."""
    out: list[Evidence] = []
    taken: set[int] = set()
    adjacent = await adjacent_turns(db, viewer, [row for row, _ in ranked[:k]]) if tuning.neighbours else {}
    for row, score in ranked:
        if len(out) >= k:
            break
        if row["id"] in taken:
            continue
        out.append(evidence_from_row(row, score))
        taken.add(row["id"])
        after, before = adjacent.get(row["id"], (None, None))
        extras = [t for t, is_after in ((after, True), (before, False))
                  if completes(row, t, is_after, tuning.neighbour_window_s)][:tuning.neighbours]
        for extra in extras:
            if len(out) < k and extra["id"] not in taken:
                out.append(evidence_from_row(extra, 0.0, neighbour_of=row["id"]))
                taken.add(extra["id"])
    return out


async def recall(db: Database, embedder, index: MessageIndex, centroids: dict[str, CentroidIndex],
                 viewer: Viewer, query: str, k: int, tuning: Tuning) -> RecallResult:
    """The best ``k`` messages (neighbour turns included) and ``k`` beliefs of the whole scope the
    viewer sees, each with its world; nothing when no word matches and the best candidate is
    below the floor."""
    text = cap(query)
    # "yesterday" in a question is read in the zone messages' dates were read in (chattext)
    # (off the event loop: language detection and segmentation load their models on first use)
    now = datetime.now(ZoneInfo(tuning.zone))

    async def by_words() -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        match = await run_cpu(lambda: fts_query(text, now=now))
        return (await keyword_messages(db, viewer, match, CANDIDATES),
                await keyword_beliefs(db, viewer, match, CANDIDATES))

    # The keyword query is made and searched (on the database's thread) while the query is embedded
    # on another core.
    vectors, (words, belief_words) = await asyncio.gather(embedder.embed([text], kind="query"), by_words())
    vec = vectors[0]
    # The worlds in use nearest the query; none when every world is archived, whose messages are
    # still searched (archived worlds are out of routing, not out of evidence).
    near = await nearest_worlds(centroids, viewer, vec)
    top_infos, (ranked, best_message), (beliefs, best_belief) = await asyncio.gather(
        world_infos(db, viewer, [near[0][0]] if near else []),
        rank_messages(db, index, viewer, vec, dict(words), dict(near), tuning),
        rank_beliefs(db, index, viewer, vec, dict(belief_words), k, tuning))
    infos = {w.id: w for w in top_infos}
    top = infos.get(near[0][0]) if near else None
    similarity = near[0][1] if near else 0.0
    if max(best_message, best_belief) < tuning.floor and not words and not belief_words:
        return RecallResult(top, similarity, [], [], {top.id: top} if top else {})
    evidence = await with_neighbours(db, viewer, ranked, k, tuning)
    wanted = sorted(({e.world_id for e in evidence} | {b.world_id for b in beliefs}) - set(infos))
    infos.update({w.id: w for w in await world_infos(db, viewer, wanted, archived=True)})
    return RecallResult(top, similarity, beliefs, evidence,
                        {w: infos[w] for w in [e.world_id for e in evidence] + [b.world_id for b in beliefs]
                         if w in infos})


# -- worlds ------------------------------------------------------------------------------

async def world_infos(db: Database, viewer: Viewer, world_ids: list[str] | None = None,
                      archived: bool = False) -> list[WorldInfo]:
    """The worlds in use the viewer sees (only ``world_ids`` when given; ``archived``: archived
    ones too), most recently active first."""
    if world_ids is not None and not world_ids:
        return []
    sees, seen = viewer.where("w.audience")
    rows = await records.worlds_seen(db, viewer.scope, sees, seen, belief_store.in_recall("b."),
                                     None if archived else in_use("w."), world_ids)
    return [WorldInfo(r["id"], r["scope"], r["topic"], maturity(r["conf"] or 0.0, r["beliefs"]),
                      r["access_count"], r["beliefs"], r["evidence"], parse_ts(r["created_at"]),
                      parse_ts(r["last_active"]), r["audience"],
                      parse_ts(r["archived_at"]) if r["archived_at"] else None) for r in rows]


async def find_world(db: Database, viewer: Viewer, name_or_id: str) -> WorldInfo | None:
    """A world the viewer sees, by id, id prefix or topic words."""
    sees, seen = viewer.where("audience")
    wanted = cap(name_or_id).strip().lower()
    if not wanted:
        return None
    found = await records.world_named(db, viewer.scope, wanted, sees, seen, in_use())
    if found is None:
        return None
    infos = await world_infos(db, viewer, [found])
    return infos[0] if infos else None


async def world_beliefs(db: Database, viewer: Viewer, world_id: str) -> list[Belief]:
    """The beliefs of a world, superseded ones too but not retired ones, newest first."""
    return await belief_store.of_world(db, viewer.scope, world_id)


async def unsorted(db: Database, viewer: Viewer) -> int:
    """How many messages the viewer may read are stored but not yet in a world (engine.memory.pending)."""
    sees, seen = viewer.where("m.audience")
    return await records.pending_seen(db, viewer.scope, sees, seen)


async def recent_messages(db: Database, viewer: Viewer, world_id: str, n: int = RECENT_MESSAGES) -> list[Evidence]:
    """A world's newest messages, newest first (what /world shows before beliefs exist)."""
    sees, seen = viewer.where(message_audience())
    rows = await records.newest_recalled(db, viewer.scope, world_id, sees, seen, n)
    return [evidence_from_row(r) for r in rows]

