"""Catching a member up on a channel: what was said there since a moment, per topic world.

The channel's messages since then (the latest ``LATEST`` of them at most) are grouped by the world
they were routed to; the busiest
``[memory] catchup_worlds`` worlds are covered, each by its ``catchup_per_world`` most central
messages (cosine to the mean of the world's messages of the period: what most of them are about).
With an LLM, ONE structured call turns those into the main points, the decisions and the open
questions of each world, written in the language most of those messages are in
(engine.memory.languages), every item citing the numbers of its messages, which are mapped back to
stored messages [M..]; who said an item is read from those messages, never from the model. So
the cost of a catch-up is one call of bounded size whatever the channel's traffic
(``estimate``; measured in bench/RESULTS.md, ``python -m bench.catchup``). Without an LLM, or
when the call fails, each world is shown by its ``catchup_extractive`` most central messages.

Only what the viewer's audience reads is used (the SQL filters by the viewer like recall), and
only messages of the one channel asked about. The call is counted against the scope like /ask
(job ``memory.catchup``), so the [llm] budget caps hold.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
from pydantic import BaseModel, Field

from engine import language
from engine.config import MemorySection
from engine.db import Database
from engine.llm.content_checks import ContentChecks
from engine.llm.errors import LLMError
from engine.memory import languages, records
from engine.memory.audience import Viewer
from engine.memory.models import Evidence, WorldInfo, from_blob, iso, parse_ts
from engine.memory.retrieval import world_infos
from engine.memory.router import normalise
from engine.offload import run_cpu

JOB = "memory.catchup"
LATEST = 20_000                # messages read at most (the latest ones): a catch-up over months stays cheap
PROMPT_CHARS = 300             # a message is cut to this many characters in the prompt
ANSWER_TOKENS = 1500           # the answer's max_tokens: a catch-up is short
SYSTEM_TOKENS = 250            # the instructions, about
MESSAGE_TOKENS = PROMPT_CHARS // 4 + 12   # one message line at most: its text, number, author and time
CHARS_PER_TOKEN = 4

SYSTEM_PROMPT = """You catch a member of a chat up on what was said in one channel while they were away.
The messages below are grouped by topic, and every message has a number in brackets.
For each topic, return:
- points: the main things said (at most 4),
- decisions: what was agreed, decided or planned (empty when nothing was),
- questions: questions asked and still open (empty when none are).
Each item is one short sentence, with sources: the numbers of the messages it comes from (at
least one). Use only what the messages say. Refer to a topic by its number."""


class CatchupItem(BaseModel):
    text: str
    sources: list[int] = Field(default_factory=list)


class TopicSummary(BaseModel):
    topic: int
    points: list[CatchupItem] = Field(default_factory=list)
    decisions: list[CatchupItem] = Field(default_factory=list)
    questions: list[CatchupItem] = Field(default_factory=list)


class CatchupAnswer(BaseModel):
    topics: list[TopicSummary] = Field(default_factory=list)


# What the answer's items say, in the language asked (engine.llm.content_checks)
CHECKS = ContentChecks(texts=tuple(f"topics[].{kind}[].text" for kind in ("points", "decisions", "questions")))


@dataclass
class Item:
    """A point, decision or open question, with the messages it rests on."""
    text: str
    sources: list[Evidence]

    @property
    def people(self) -> list[str]:
        return list(dict.fromkeys(e.author for e in self.sources))


@dataclass
class WorldCatchup:
    world: WorldInfo
    messages: int                   # the world's messages in the channel since then
    people: list[str]               # who wrote them, most messages first
    central: list[Evidence]         # its most central messages, in chat order (shown without an LLM)
    points: list[Item] = field(default_factory=list)
    decisions: list[Item] = field(default_factory=list)
    questions: list[Item] = field(default_factory=list)


@dataclass
class Catchup:
    since: datetime
    messages: int                   # in the channel since then, every world
    worlds: list[WorldCatchup]      # the busiest, busiest first
    other_worlds: int = 0           # worlds with messages beyond those covered
    summarised: bool = False        # points, decisions and questions came from the LLM
    error: str | None = None        # why the LLM summary is missing when an LLM is configured


def estimate(cfg: MemorySection) -> tuple[int, int]:
    """(calls, tokens at most) of one catch-up with an LLM: one call whatever the channel's size."""
    return 1, SYSTEM_TOKENS + cfg.catchup_worlds * cfg.catchup_per_world * MESSAGE_TOKENS + ANSWER_TOKENS


_SINCE = re.compile(r"^(\d+(?:\.\d+)?)\s*(m|min|mins|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime, zone: str = "UTC") -> datetime:
    """'2h', '30m', '3d', '1w', 'today', 'yesterday' (days begin at midnight in ``zone``) or an ISO
    date or time (in ``zone`` when it names none) -> an aware moment before ``now``; ValueError
    with a readable message otherwise."""
    word = text.strip().lower()
    local = now.astimezone(ZoneInfo(zone))
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if word in ("today", "yesterday"):
        return midnight - timedelta(days=1 if word == "yesterday" else 0)
    if m := _SINCE.match(word):
        return now - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)[0]])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"since must look like 2h, 30m, 3d, today, yesterday or 2025-03-01, not {text!r}") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=ZoneInfo(zone))
    if moment > now:
        raise ValueError(f"{text} is in the future")
    return moment


def _central(vectors: np.ndarray, n: int) -> list[int]:
    """Positions of the ``n`` rows nearest the normalised mean of ``vectors``, most central first."""
    sims = vectors @ normalise(vectors.mean(axis=0))
    return [int(i) for i in np.argsort(-sims, kind="stable")[:n]]


def _evidence(row, topic: str) -> Evidence:
    return Evidence(id=row["id"], world_id=row["world_id"], channel=row["channel"], message_id=row["message_id"],
                    author=row["author"], text=row["text"], ts=parse_ts(row["ts"]), world_topic=topic)


def prompt(worlds: list[WorldCatchup], numbered: list[tuple[int, Evidence]], lang: str) -> list[dict]:
    """The catch-up prompt: each world's chosen messages under its topic number, numbered; the
    answer in language ``lang`` (the messages': engine.memory.languages)."""
    by_world: dict[str, list[tuple[int, Evidence]]] = {}
    for n, e in numbered:
        by_world.setdefault(e.world_id, []).append((n, e))
    parts = []
    for t, w in enumerate(worlds, 1):
        lines = [f"[{n}] {e.author} ({e.ts:%Y-%m-%d %H:%M}): {e.text[:PROMPT_CHARS]}"
                 for n, e in by_world.get(w.world.id, [])]
        parts.append(f"Topic {t}: {w.world.topic or 'untitled'} ({w.messages} messages, {len(lines)} shown)\n"
                     + "\n".join(lines))
    return [{"role": "system", "content": f"{SYSTEM_PROMPT}\n{language.answer_in(lang)}"},
            {"role": "user", "content": "\n\n".join(parts)}]


def _items(found: list[CatchupItem], numbered: dict[int, Evidence]) -> list[Item]:
    """Items with at least one source among the numbers given; unknown numbers are dropped."""
    out = []
    for item in found:
        sources = [numbered[n] for n in dict.fromkeys(item.sources) if n in numbered]
        if item.text.strip() and sources:
            out.append(Item(item.text.strip(), sources))
    return out


async def catchup(db: Database, llm: Any, cfg: MemorySection, viewer: Viewer, channel: str,
                  since: datetime, after: int | None = None) -> Catchup:
    """What was said in ``channel`` of the viewer's scope after ``since`` (or, given ``after``, after
    that stored message: the asker's last one), per topic world (see the module's docstring).
    ``llm`` None: the extractive catch-up."""
    sees, seen = viewer.where("w.audience")
    rows = await records.said_after(db, viewer.scope, channel, after, iso(since), sees, seen, LATEST)
    rows.reverse()
    total = len(rows) if len(rows) < LATEST else await records.count_said_after(
        db, viewer.scope, channel, after, iso(since), sees, seen)
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(r["world_id"], []).append(r)
    busiest = sorted(groups, key=lambda w: (-len(groups[w]), w))
    covered = busiest[:cfg.catchup_worlds]
    infos = {w.id: w for w in await world_infos(db, viewer, covered, archived=True)}
    out = Catchup(since, total, [], other_worlds=len(busiest) - len(covered))
    picked: dict[str, list[Evidence]] = {}
    for wid in covered:
        if wid not in infos:
            continue
        group = groups[wid]
        vectors = np.stack([from_blob(r["embedding"]) for r in group])
        order = await run_cpu(_central, vectors, cfg.catchup_per_world)
        topic = infos[wid].topic
        picked[wid] = [_evidence(group[i], topic) for i in sorted(order)]   # chat order
        counts: dict[str, int] = {}
        for r in group:
            counts[r["author"]] = counts.get(r["author"], 0) + 1
        shown = sorted(order[:cfg.catchup_extractive])
        out.worlds.append(WorldCatchup(infos[wid], len(group), sorted(counts, key=lambda a: (-counts[a], a)),
                                       [_evidence(group[i], topic) for i in shown]))
    if llm is None or not out.worlds:
        return out
    numbered = list(enumerate((e for w in out.worlds for e in picked[w.world.id]), 1))
    lang = await run_cpu(languages.of_texts, [e.text for _, e in numbered])
    try:
        answer = await llm.structured(CatchupAnswer, prompt(out.worlds, numbered, lang), job=JOB, scope=viewer.scope,
                                      max_tokens=ANSWER_TOKENS, checks=CHECKS.in_language(lang))
    except LLMError as err:
        out.error = str(err)
        return out
    by_number = dict(numbered)
    for summary in answer.topics:
        if 1 <= summary.topic <= len(out.worlds):
            w = out.worlds[summary.topic - 1]
            w.points += _items(summary.points, by_number)
            w.decisions += _items(summary.decisions, by_number)
            w.questions += _items(summary.questions, by_number)
    out.summarised = any(w.points or w.decisions or w.questions for w in out.worlds)
    return out
