"""Topic names: from the LLM when one is configured, else the words that set a world apart.

The keyword name is class-based TF-IDF (as in BERTopic): each world's recent messages form one
document; a word scores high when it is frequent in this world and rare across the scope.
A world is renamed when it grew by ``topic_refresh_growth`` since it was last named; naming
reads only what the world's audience can read, so a name never leaks another audience's words.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

import numpy as np
from pydantic import BaseModel, Field

from engine.config import MemorySection
from engine.db import Database
from engine.memory.models import WorldState
from engine.memory.scope_cache import ScopeState
from engine.memory.textutil import STOP_WORDS, content_words
from engine.offload import run_cpu

log = logging.getLogger(__name__)

TOPIC_SAMPLE = 30          # newest messages per world that topic naming reads
TOPIC_LLM_PER_PASS = 20    # LLM topic names per refresh pass; the rest keep keyword names
TOPIC_CONTRAST = 300       # other worlds a keyword topic is contrasted with


def needs_topic(cfg: MemorySection, world: WorldState) -> bool:
    """A world is (re)named once it holds three messages, and again each time it grew enough."""
    return world.evidence >= 3 and world.evidence >= world.topic_size * cfg.topic_refresh_growth


async def rename_later(delay_s: float, rename: Callable[[], Awaitable[Any]], scope: str) -> None:
    """Run ``rename`` after ``delay_s`` (a burst of messages is named once); a failure is logged."""
    try:
        await asyncio.sleep(delay_s)
        await rename()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("topic refresh failed for %s", scope)


async def name_worlds(db: Database, llm: Any, cfg: MemorySection, scope: str, state: ScopeState,
                      targets: set[str]) -> int:
    """Name the ``targets`` worlds (keywords, or the LLM's name when ``llm`` is set) and store the
    names with the size each world had; returns how many were named."""
    docs: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for audience in sorted({state.worlds[w].audience for w in targets}):
        # Contrast with the largest worlds of the same audience (all of them in small scopes):
        # a name draws on nothing its audience cannot read.
        group = {w for w in targets if state.worlds[w].audience == audience}
        peers = [w for w in state.worlds if state.worlds[w].audience == audience]
        contrast = sorted(peers, key=lambda w: -state.worlds[w].evidence)[:TOPIC_CONTRAST]
        group_docs = await topic_docs(db, sorted(group | set(contrast)))
        names.update(await run_cpu(keyword_topics, group_docs, group, cfg.topic_keywords))
        docs.update(group_docs)
    if llm is not None:
        for wid in sorted(targets, key=lambda w: -state.worlds[w].evidence)[:TOPIC_LLM_PER_PASS]:
            facts = [f"{r['subject']} {r['predicate']} {r['object']}" for r in await db.fetchall(
                "SELECT subject, predicate, object FROM beliefs WHERE world_id=? AND invalid_at IS NULL "
                "ORDER BY confidence DESC LIMIT 10", (wid,))]
            try:
                named = await llm.structured(TopicName, topic_prompt(names.get(wid, ""), docs.get(wid, []), facts),
                                             fast=True, job="memory.topic", scope=scope)
                if named.name.strip():
                    names[wid] = named.name.strip()[:80]
            except Exception:
                log.warning("LLM topic name failed for world %s; keeping keywords", wid, exc_info=True)
    sizes = {wid: state.worlds[wid].evidence for wid in targets}
    async with db.transaction() as conn:
        await conn.executemany("UPDATE worlds SET topic=?, topic_size=? WHERE id=? AND scope=?",
                               [(name, sizes[wid], wid, scope) for wid, name in names.items()])
    for wid in names:
        if wid in state.worlds:
            state.worlds[wid].topic_size = sizes[wid]
    return len(names)


async def topic_docs(db: Database, world_ids: list[str]) -> dict[str, list[str]]:
    """world id -> the texts of its newest messages (at most TOPIC_SAMPLE)."""
    docs: dict[str, list[str]] = {}
    for i in range(0, len(world_ids), 500):
        part = world_ids[i:i + 500]
        rows = await db.fetchall(
            "SELECT world_id, text FROM (SELECT world_id, text, row_number() OVER "
            "(PARTITION BY world_id ORDER BY id DESC) AS rn FROM memory_messages "
            f"WHERE world_id IN ({','.join('?' * len(part))})) WHERE rn<=?", (*part, TOPIC_SAMPLE))
        for r in rows:
            docs.setdefault(r["world_id"], []).append(r["text"])
    return docs


def keyword_topics(docs: dict[str, list[str]], targets: set[str], n_words: int) -> dict[str, str]:
    """Names for the ``targets`` worlds; ``docs`` holds every world of the scope (for contrast)."""
    from sklearn.feature_extraction.text import CountVectorizer

    ids = list(docs)
    corpus = [" ".join(docs[w]) for w in ids]
    vectorizer = CountVectorizer(stop_words=sorted(w for w in STOP_WORDS if "'" not in w), lowercase=True,
                                 token_pattern=r"(?u)\b[^\W\d_][\w-]+\b")
    try:
        counts = vectorizer.fit_transform(corpus)
    except ValueError:  # nothing but stop words anywhere
        return {}
    vocab = vectorizer.get_feature_names_out()
    totals = np.asarray(counts.sum(axis=0)).ravel()
    avg_words = counts.sum() / max(len(ids), 1)
    idf = np.log1p(avg_words / np.maximum(totals, 1))
    names = {}
    for row, wid in enumerate(ids):
        if wid not in targets:
            continue
        tf = counts[row].toarray().ravel().astype(np.float64)
        if tf.sum() == 0:
            continue
        score = tf / tf.sum() * idf
        top = [i for i in np.argsort(-score, kind="stable")[:n_words] if score[i] > 0]
        if top:
            names[wid] = " · ".join(vocab[i] for i in top)
    return names


class TopicName(BaseModel):
    name: str = Field(description="2 to 5 words naming what this conversation is about")


def topic_prompt(keywords: str, samples: list[str], beliefs: list[str]) -> list[dict]:
    facts = "\n".join(f"- {b}" for b in beliefs[:10])
    lines = "\n".join(f"- {s[:200]}" for s in samples[:15])
    return [
        {"role": "system", "content": "You name chat topics. Give a short, specific name of 2 to 5 words "
                                      "(no quotes, no trailing period) that tells this topic apart from others."},
        {"role": "user", "content": f"Distinctive words: {keywords or '(none)'}\n"
                                    f"Known facts:\n{facts or '(none)'}\nRecent messages:\n{lines}"},
    ]


def initial_topic(text: str) -> str:
    """A provisional name for a newborn world: the first content words of its first message."""
    found = content_words(text)[:4]
    return " ".join(found) if found else text.strip()[:40]
