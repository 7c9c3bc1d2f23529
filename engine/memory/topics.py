"""Topic names: from the LLM when one is configured, else the words that set a world apart.

The keyword name is class-based TF-IDF (as in BERTopic): each world's recent messages form one
document; a word scores high when it is frequent in this world and rare across the scope.
Keywords are counted per stem ("match" and "matches" are one) with stop words, auxiliaries and
contractions ("did", "i've") left out, and written as a short phrase: words the chat says side
by side stay together in its order ("football match"), groups follow their weight, each word
keeps the spelling and case it mostly has in the chat ("Arsenal", "CSV"), and the first letter
is a capital: "Arsenal football match" rather than "did football match arsenal".
A world is renamed when it grew by ``topic_refresh_growth`` since it was last named; naming
reads only what the world's audience can read, so a name never leaks another audience's words.
"""
from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Awaitable, Callable

import numpy as np
import snowballstemmer
from pydantic import BaseModel, Field

from engine.config import MemorySection
from engine.db import Database
from engine.memory.models import WorldState
from engine.memory.scope_cache import ScopeState
from engine.memory.textutil import STOP_WORDS
from engine.offload import run_cpu

log = logging.getLogger(__name__)

TOPIC_SAMPLE = 30          # newest messages per world that topic naming reads
TOPIC_LLM_PER_PASS = 20    # LLM topic names per refresh pass; the rest keep keyword names
TOPIC_CONTRAST = 300       # other worlds a keyword topic is contrasted with

# Words that name no topic, beyond the shared stop words: auxiliaries and chat verbs.
NAME_STOP = STOP_WORDS | frozenset({
    "did", "does", "doing", "let", "lets", "want", "wanna", "gotta", "going", "went", "say", "said",
    "tell", "told", "thing", "things", "stuff", "lot", "lots", "need", "try", "tried", "look", "feel",
    "mean", "use", "used", "using", "vs", "actually", "pretty", "probably", "anyway", "sounds", "awesome", "love", "hey", "hi", "hello",
    "today", "tonight", "tomorrow", "yesterday",
})
_TOKEN = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE_END = re.compile(r"[.!?:;]")


_per_thread = threading.local()


def _stemmer():
    """This thread's stemmer: a snowball stemmer keeps its word in itself while it works, so threads
    must not share one (worlds are named off the event loop while routing names newborn worlds on it)."""
    stemmer = getattr(_per_thread, "stemmer", None)
    if stemmer is None:
        stemmer = _per_thread.stemmer = snowballstemmer.stemmer("english")
    return stemmer


@dataclass(frozen=True)
class _Word:
    stem: str
    form: str            # lower-case spelling
    case: str | None     # 'upper' (CSV), 'title' (Berlin mid-sentence), 'lower', None: no evidence
    pos: int             # place among all the message's words, stop words included


def _words(text: str) -> list[_Word]:
    """The message's topic words with what they say about their spelling."""
    shouting = sum(c.isupper() for c in text) > sum(c.islower() for c in text)
    found = list(_TOKEN.finditer(text))
    out = []
    for pos, match in enumerate(found):
        token = match.group().replace("’", "'").strip("'-")
        lower = token.lower()
        if "'" in lower:
            base, _, tail = lower.rpartition("'")
            if tail != "s" or base in NAME_STOP:
                continue  # i've, don't, it's: no topic
            token, lower = token[:len(base)], base  # Arsenal's -> Arsenal
        if len(lower) < 2 or lower in NAME_STOP:
            continue
        first = pos == 0 or bool(_SENTENCE_END.search(text[found[pos - 1].end():match.start()]))
        if shouting:
            case = None
        elif len(token) > 1 and token.isupper():
            case = "upper"
        elif token[0].isupper():
            case = None if first else "title"
        else:
            case = "lower"
        out.append(_Word(_stemmer().stemWord(lower), lower, case, pos))
    return out


def _spelling(forms: Counter, cases: Counter) -> str:
    """The word as the chat mostly writes it: its commonest form (the shorter on a tie: the
    singular), in its commonest case among the places that tell."""
    form = max(forms, key=lambda f: (forms[f], -len(f)))
    case = max(cases, key=lambda c: (cases[c], c == "lower")) if cases else "lower"
    return form.upper() if case == "upper" else form.capitalize() if case == "title" else form


def _sentence_case(words: list[str]) -> str:
    name = " ".join(words)
    return name[:1].upper() + name[1:]


def phrase(stems: list[str], messages: list[list[_Word]]) -> str:
    """``stems`` (strongest first) as a short phrase: stems the messages mostly say side by side
    are joined in that order, the groups ordered by their strongest stem."""
    chosen = set(stems)
    forms: dict[str, Counter] = {s: Counter() for s in stems}
    cases: dict[str, Counter] = {s: Counter() for s in stems}
    follows: Counter = Counter()
    together: Counter = Counter()
    for words in messages:
        mine = [w for w in words if w.stem in chosen]
        for w in mine:
            forms[w.stem][w.form] += 1
            if w.case:
                cases[w.stem][w.case] += 1
        for a, b in zip(mine, mine[1:]):
            if b.pos == a.pos + 1 and a.stem != b.stem:
                follows[a.stem, b.stem] += 1
        together.update(combinations(sorted({w.stem for w in mine}), 2))
    groups = [[s] for s in stems]
    for (a, b), n in follows.most_common():
        if n <= follows[b, a] or 2 * n < together[min(a, b), max(a, b)]:
            continue  # not mostly said in this order, side by side
        head = next((g for g in groups if g[-1] == a), None)
        tail = next((g for g in groups if g[0] == b), None)
        if head is not None and tail is not None and head is not tail:
            head.extend(tail)
            groups.remove(tail)
    groups.sort(key=lambda g: min(stems.index(s) for s in g))
    return _sentence_case([_spelling(forms[s], cases[s]) for g in groups for s in g])


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
                "ORDER BY confidence DESC, id LIMIT 10", (wid,))]
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
            f"WHERE world_id IN ({','.join('?' * len(part))})) t WHERE rn<=? ORDER BY world_id, rn", (*part, TOPIC_SAMPLE))
        for r in rows:
            docs.setdefault(r["world_id"], []).append(r["text"])
    return docs


def keyword_topics(docs: dict[str, list[str]], targets: set[str], n_words: int) -> dict[str, str]:
    """Names for the ``targets`` worlds; ``docs`` holds every world of the scope (for contrast)."""
    from sklearn.feature_extraction.text import CountVectorizer

    ids = list(docs)
    parsed = {w: [_words(text) for text in docs[w]] for w in ids}
    vectorizer = CountVectorizer(analyzer=lambda messages: [w.stem for words in messages for w in words])
    try:
        counts = vectorizer.fit_transform([parsed[w] for w in ids])
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
            names[wid] = phrase([vocab[i] for i in top], parsed[wid])
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
    """A provisional name for a newborn world: the first topic words of its first message, as a
    phrase (one word per stem, in the message's order)."""
    first: dict[str, _Word] = {}
    for w in _words(text):
        first.setdefault(w.stem, w)
    words = list(first.values())[:4]
    if not words:
        return text.strip()[:40]
    return _sentence_case([_spelling(Counter([w.form]), Counter([w.case] if w.case else [])) for w in words])
