"""Topic names: from the LLM when one is configured, else the words that set a world apart.

The keyword name is class-based TF-IDF (as in BERTopic): each world's recent messages form one
document; a word scores high when it is frequent in this world and rare across the scope.
Keywords are counted per stem ("match" and "matches" are one) with stop words, auxiliaries and
contractions ("did", "i've") left out, each message read in its own language (its stop words
and stemmer, and the chat verbs and days of ``NAME_STOP_OF``: "Oi pessoal, alguém vai?" names
nothing; Thai and Chinese segmented into words, a compound said once rather than with its parts,
and their words joined without spaces as those scripts are written: "足球比赛", not "足球 比赛 足球比赛"),
and written as a short phrase: words the chat says side by side stay together in its order
("football match"), groups follow their weight, each word keeps the spelling and case it mostly
has in the chat ("Arsenal", "CSV"), and the first letter is a capital: "Arsenal football match"
rather than "did football match arsenal".
The LLM's name is asked for in the language most of the world's recent messages are in
(engine.memory.languages), so a Thai world gets a Thai name.
When a world is named (``needs_topic``, the one home of the rule): first once it holds three
messages. A name drawn from fewer than ``NAME_SETTLED_AT`` messages is provisional: it is
recomputed each time the world grows (messages are routed a few at a time as they are embedded,
so a world's first name may rest on two or three lines and the fourth often says what it is
about); after that it is renamed when the world grew by ``topic_refresh_growth`` since it was
last named. Renaming runs ``topic_delay_s`` after a growth, so a burst still costs one pass.
Naming reads only what the world's audience can read, so a name never leaks another audience's
words.
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Awaitable, Callable

import numpy as np
from pydantic import BaseModel, Field

from engine import language
from engine.config import MemorySection
from engine.db import Database
from engine.llm.content_checks import ContentChecks
from engine.llm.errors import InvalidAnswer, LLMError
from engine.memory import beliefs as belief_store, languages, records, terms
from engine.memory.models import WorldState
from engine.memory.scope_cache import ScopeState
from engine.memory.textutil import STOP_WORDS, stop_words
from engine.offload import run_cpu

log = logging.getLogger(__name__)

TOPIC_SAMPLE = 30          # newest messages per world that topic naming reads
TOPIC_LLM_PER_PASS = 20    # LLM topic names per refresh pass; the rest keep keyword names
TOPIC_CONTRAST = 300       # other worlds a keyword topic is contrasted with
NAME_FIRST_AT = 3          # messages a world holds when it is first named (before: its first line's words)
NAME_SETTLED_AT = 8        # a name drawn from fewer messages is provisional: renamed at each growth

# Words that name no topic, beyond the shared stop words: auxiliaries and chat verbs.
NAME_STOP = STOP_WORDS | frozenset({
    "did", "does", "doing", "let", "lets", "want", "wanna", "gotta", "going", "went", "say", "said",
    "tell", "told", "thing", "things", "stuff", "lot", "lots", "need", "try", "tried", "look", "feel",
    "mean", "use", "used", "using", "vs", "actually", "pretty", "probably", "anyway", "sounds", "awesome",
    "love", "hey", "hi", "hello",
    "today", "tonight", "tomorrow", "yesterday",
})
# The same in other languages, beyond their stop words (chat verbs and days that name no topic).
NAME_STOP_OF = {
    "pt": frozenset({"hoje", "ontem", "amanhã", "vou", "acho", "sabe", "alguém"}),
    "th": frozenset({"ไปดู", "ดู", "รู้", "วันนี้", "พรุ่งนี้", "เมื่อวาน", "ขอบคุณ", "สวัสดี"}),
    "zh": frozenset({"有人", "知道", "一起", "觉得", "今天", "明天", "昨天", "现在", "谢谢", "已经", "想", "太",
                     "请问", "哈哈", "哈哈哈"}),
}
_UNSPACED_CHARS = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Thai, kana, Han
_UNSPACED = re.compile(f"[{_UNSPACED_CHARS}]")
_TOKEN = re.compile(rf"[{_UNSPACED_CHARS}]+|[^\W\d_][\w'’-]*")
_SENTENCE_END = re.compile(r"[.!?:;。！？]")


@dataclass(frozen=True)
class _Word:
    stem: str
    form: str            # lower-case spelling
    case: str | None     # 'upper' (CSV), 'title' (Berlin mid-sentence), 'lower', None: no evidence
    pos: int             # place among all the message's words, stop words included


def _words(text: str) -> list[_Word]:
    """The message's topic words with what they say about their spelling, in the message's
    language: its stop words left out, stemmed by its stemmer; Thai and Chinese are segmented
    into words first (engine.memory.terms)."""
    lang = terms.detect_language(text)
    stop = NAME_STOP | stop_words(lang) | NAME_STOP_OF.get(lang, frozenset())
    shouting = sum(c.isupper() for c in text) > sum(c.islower() for c in text)
    found = list(_TOKEN.finditer(text))
    out = []
    pos = -1
    for n, match in enumerate(found):
        token = match.group().replace("’", "'").strip("'-")
        pos += 1
        if _UNSPACED.search(token):   # a run of words without spaces: its segments, no case
            for word, stems in terms.segments(token):
                pos += 1
                if word not in stop and (len(word) > 1 or not stems):
                    out.append(_Word(terms.stem(word, lang) if stems else word, word, None, pos))
            continue
        lower = token.lower()
        if "'" in lower:
            base, _, tail = lower.rpartition("'")
            if tail != "s" or base in stop:
                continue  # i've, don't, it's: no topic
            token, lower = token[:len(base)], base  # Arsenal's -> Arsenal
        if len(lower) < 2 or lower in stop:
            continue
        first = n == 0 or bool(_SENTENCE_END.search(text[found[n - 1].end():match.start()]))
        if shouting:
            case = None
        elif len(token) > 1 and token.isupper():
            case = "upper"
        elif token[0].isupper():
            case = None if first else "title"
        else:
            case = "lower"
        out.append(_Word(terms.stem(lower, lang), lower, case, pos))
    return out


def _spelling(forms: Counter, cases: Counter) -> str:
    """The word as the chat mostly writes it: its commonest form (the shorter on a tie: the
    singular), in its commonest case among the places that tell."""
    form = max(forms, key=lambda f: (forms[f], -len(f)))
    case = max(cases, key=lambda c: (cases[c], c == "lower")) if cases else "lower"
    return form.upper() if case == "upper" else form.capitalize() if case == "title" else form


def _sentence_case(words: list[str]) -> str:
    """``words`` as a name: spaced, but words of scripts written without spaces (Thai, Chinese,
    Japanese) side by side joined ("足球比赛", not "足球 比赛"); the first letter a capital."""
    name = ""
    for word in words:
        joined = bool(name) and bool(_UNSPACED.match(word[:1])) and bool(_UNSPACED.match(name[-1]))
        name += word if not name or joined else f" {word}"
    return name[:1].upper() + name[1:]


def _without_parts(words: list[str]) -> list[str]:
    """``words`` without a segment of an unspaced script that another of them contains: Chinese
    is segmented both as a compound and as its parts (足球比赛, 足球, 比赛): a name says the compound."""
    return [w for w in words if not (_UNSPACED.search(w) and any(w != o and w in o for o in words))]


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
    """A world is named once it holds NAME_FIRST_AT messages; then again at each growth while its
    name is provisional (drawn from fewer than NAME_SETTLED_AT), and after that each time it grew
    by ``topic_refresh_growth`` since it was last named."""
    if world.evidence < NAME_FIRST_AT or world.evidence <= world.topic_size:
        return False
    return world.topic_size < NAME_SETTLED_AT or world.evidence >= world.topic_size * cfg.topic_refresh_growth


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
            facts = [f"{r['subject']} {r['predicate']} {r['object']}"
                     for r in await belief_store.strongest(db, wid, 10)]
            samples = docs.get(wid, [])
            lang = await run_cpu(languages.of_texts, samples)
            try:
                named = await llm.structured(TopicName, topic_prompt(names.get(wid, ""), samples, facts, lang),
                                             fast=True, activity="memory.topic", scope=scope,
                                             checks=NAME_CHECKS.in_language(lang))
                if named.name.strip():
                    names[wid] = named.name.strip()[:80]
            except InvalidAnswer as err:   # this world's answer was unusable; the next one may not be
                log.warning("world %s keeps its keyword name: %s", wid, err)
            except LLMError as err:   # the endpoint is down or refused: the next world would wait as long
                log.warning("worlds of %s keep their keyword names: %s", scope, err)
                break
            except Exception:
                log.warning("LLM topic name failed for world %s; keeping keywords", wid, exc_info=True)
    sizes = {wid: state.worlds[wid].evidence for wid in targets}
    async with db.transaction() as conn:
        await records.name_worlds(conn, [(name, sizes[wid], wid, scope) for wid, name in names.items()])
    for wid in names:
        if wid in state.worlds:
            state.worlds[wid].topic_size = sizes[wid]
    return len(names)


async def topic_docs(db: Database, world_ids: list[str]) -> dict[str, list[str]]:
    """world id -> the texts of its newest messages (at most TOPIC_SAMPLE)."""
    return await records.newest_texts_by_world(db, world_ids, TOPIC_SAMPLE)


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
            names[wid] = phrase(_without_parts([vocab[i] for i in top]), parsed[wid])
    return names


class TopicName(BaseModel):
    name: str = Field(description="2 to 5 words naming what this conversation is about")


NAME_CHECKS = ContentChecks(texts=("name",))


def topic_prompt(keywords: str, samples: list[str], beliefs: list[str], lang: str) -> list[dict]:
    """The LLM's naming request; the name in language ``lang`` (the world's messages')."""
    facts = "\n".join(f"- {b}" for b in beliefs[:10])
    lines = "\n".join(f"- {s[:200]}" for s in samples[:15])
    return [
        {"role": "system", "content": "You name chat topics. Give a short, specific name of 2 to 5 words "
                                      "(no quotes, no trailing period) that tells this topic apart from others. "
                                      f"{language.answer_in(lang)}"},
        {"role": "user", "content": f"Distinctive words: {keywords or '(none)'}\n"
                                    f"Known facts:\n{facts or '(none)'}\nRecent messages:\n{lines}"},
    ]


def initial_topic(text: str) -> str:
    """A provisional name for a newborn world: the first topic words of its first message, as a
    phrase (one word per stem, in the message's order)."""
    first: dict[str, _Word] = {}
    for w in _words(text):
        first.setdefault(w.stem, w)
    kept = set(_without_parts(list(first)))
    words = [w for stem, w in first.items() if stem in kept][:4]
    if not words:
        return text.strip()[:40]
    return _sentence_case([_spelling(Counter([w.form]), Counter([w.case] if w.case else [])) for w in words])
