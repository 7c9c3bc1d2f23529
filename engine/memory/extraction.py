"""Belief extraction by the LLM: one call per channel batch, off the message path.

A batch is up to ``extract_batch_max`` unread messages of one channel, whatever worlds they
were routed to: the messages go to the LLM numbered in chat order, each belief it returns
names the numbers it comes from, and the belief later lands in the world of those messages
(``beliefs.store``). One call per batch rather than one per world keeps extraction at a few
calls per hundred messages. A belief is kept in the language of its messages: the prompt names
the language most of the batch is in (engine.memory.languages).

What the LLM returns is vetted before anything is stored (``vet``): an answer that is not
well-formed JSON is asked again, never mended (a cut-off answer would leave cut-off triples),
and a belief is dropped, with a log line, when a field is empty, a placeholder or a pronoun,
carries a truncation mark, is absurdly long, or when its subject or object does not occur in
its source messages in any form (its speakers' names count: "I" is said by someone).

``ExtractionScheduler.note`` is all that ingest does: it counts the channel's new messages and
starts a batch in the background after ``every_n`` of them, or ``every_s`` seconds after the
first one, whichever comes first. One batch runs per channel at a time; messages arriving
meanwhile start another one after it.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, Field

from engine import language
from engine.db import Database
from engine.llm.errors import InvalidAnswer, LLMError
from engine.memory import beliefs as belief_store, languages, records
from engine.memory.beliefs import NewBelief, norm
from engine.memory.models import parse_ts, utcnow
from engine.offload import run_cpu

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You extract durable facts from a chat so a bot can remember them.
Read the numbered messages (they may be about several topics) and return beliefs as
(subject, predicate, object) triples:
- subject and object are short noun phrases (people, things, places, projects, dates) in the
  messages' own words; a speaker's "I" is their name. predicate is a short verb phrase
  ("lives in", "prefers", "is scheduled for").
- Only facts stated or clearly implied by the messages; no opinions about the chat itself,
  no greetings, no questions.
- confidence: 0.9+ when stated plainly, 0.5-0.8 when implied or hedged.
- exclusive: true when the subject can hold only one object for this predicate at a time
  (lives in, works at, meeting is on, version is), so a new value replaces the old one.
- sources: the numbers of the messages the belief comes from (at least one).
Return an empty list when nothing is worth remembering."""

MAX_SUBJECT = 120       # characters; longer is not a noun phrase
MAX_PREDICATE = 60
MAX_OBJECT = 300        # an object may quote a short message
TRUNCATION_MARKS = ("...", "\u2026")
JSON_DEBRIS = ("{", "}", '\\"')
PLACEHOLDERS = frozenset({
    "unknown", "none", "null", "nil", "nan", "n a", "na", "undefined", "tbd", "todo", "something",
    "someone", "somebody", "anyone", "anything", "thing", "stuff", "subject", "predicate", "object",
    "string", "value", "example", "placeholder", "lorem ipsum", "xxx", "etc"})
# Words that name nothing on their own: a field made only of these is a pronoun or filler.
FUNCTION_WORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "and", "or", "with", "by", "from", "s",
    "my", "our", "your", "his", "her", "their", "its", "i", "me", "we", "us", "you", "he", "him",
    "she", "they", "them", "it", "this", "that", "these", "those", "there", "here"})


class ExtractedBelief(BaseModel):
    subject: str
    predicate: str
    object: str
    confidence: float = Field(0.8, ge=0.0, le=1.0)
    exclusive: bool = False
    sources: list[int] = Field(default_factory=list)


class Extraction(BaseModel):
    beliefs: list[ExtractedBelief] = Field(default_factory=list)


@dataclass(frozen=True)
class Source:
    """An unread message of the batch, as the LLM sees it (``number``) and as stored (``id``)."""
    number: int
    id: int
    author: str
    text: str
    ts: datetime


def prompt(numbered: list[tuple[int, str, str]], lang: str) -> list[dict]:
    """numbered: (number, author, text) in chat order; ``lang``: the language most of them are in."""
    lines = "\n".join(f"[{n}] {author}: {text}" for n, author, text in numbered)
    name = language.named(lang)
    keep = (f"Keep beliefs in the language of their messages: these are mostly in {name}, so write "
            f"subject, predicate and object in {name} (a belief from messages in another language "
            "stays in theirs).")
    return [{"role": "system", "content": f"{SYSTEM_PROMPT}\n{keep}"},
            {"role": "user", "content": f"Messages:\n{lines}"}]


def _tokens(text: str) -> list[str]:
    return norm(text).split()


def _same_word(a: str, b: str) -> bool:
    """Two forms of one word: equal, one a prefix of the other (team/teams), or sharing their
    first five letters (meeting/meetings, deploy/deployed)."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return (len(short) >= 4 and long_.startswith(short)) or (len(short) >= 5 and short[:5] == long_[:5])


def _field_problem(name: str, value: str, limit: int) -> str | None:
    text = value.strip()
    if not text:
        return f"empty {name}"
    if len(text) > limit:
        return f"{name} of {len(text)} characters"
    if any(mark in text for mark in TRUNCATION_MARKS):
        return f"truncated {name}"
    if any(mark in text for mark in JSON_DEBRIS):
        return f"JSON debris in {name}"
    said = norm(text)
    if not said or said in PLACEHOLDERS:
        return f"placeholder {name}"
    return None


def _grounded(value: str, words: set[str]) -> bool:
    content = [t for t in _tokens(value) if t not in FUNCTION_WORDS]
    return any(_same_word(t, w) for t in content for w in words)


def vet(found: ExtractedBelief, batch: list[Source]) -> tuple[list[Source], str | None]:
    """The belief's source messages, and why it is garbage (None when it is not)."""
    for name, value, limit in (("subject", found.subject, MAX_SUBJECT), ("predicate", found.predicate,
                               MAX_PREDICATE), ("object", found.object, MAX_OBJECT)):
        problem = _field_problem(name, value, limit)
        if problem:
            return [], problem
    for name, value in (("subject", found.subject), ("object", found.object)):
        if not [t for t in _tokens(value) if t not in FUNCTION_WORDS]:
            return [], f"{name} is only a pronoun"
    by_number = {s.number: s for s in batch}
    sources = [by_number[n] for n in dict.fromkeys(found.sources) if n in by_number]
    if not sources:
        # No usable source numbers: the messages that mention the object, if any do.
        sources = [s for s in batch if _grounded(found.object, set(_tokens(s.text)))]
        if not sources:
            return [], "no source message"
    words = {w for s in sources for w in _tokens(s.text) + _tokens(s.author)}
    for name, value in (("subject", found.subject), ("object", found.object)):
        if not _grounded(value, words):
            return [], f"{name} not in its source messages"
    return sources, None


async def extract_batch(llm: Any, scope: str, channel: str, batch: list[Source]) -> list[NewBelief]:
    """One LLM call for the whole batch; the beliefs that pass ``vet``, each valid from the time of
    its latest source message. An answer never in shape (even after the client's corrective
    retries) gives nothing: its messages are skipped rather than retried forever; other LLM
    errors (endpoint down, budget) propagate and leave them unread."""
    lang = await run_cpu(languages.of_texts, [s.text for s in batch])
    try:
        out = await llm.structured(Extraction, prompt([(s.number, s.author, s.text) for s in batch], lang),
                                   fast=True, activity="memory.extract", scope=scope, repair=False)
    except InvalidAnswer as err:   # its text quotes the answer, which quotes the chat: not at WARNING
        log.warning("no beliefs from %d messages of %s/%s: the LLM never answered in shape", len(batch), scope,
                    channel)
        log.info("no beliefs from %s/%s: %s", scope, channel, err)
        return []
    kept: list[NewBelief] = []
    for b in out.beliefs:
        sources, problem = vet(b, batch)
        if problem:
            log.debug("rejected a belief from %s/%s (%s): %r %r %r", scope, channel, problem,
                      b.subject[:80], b.predicate[:80], b.object[:80])   # chat text: never above DEBUG
            continue
        kept.append(NewBelief(b.subject.strip(), b.predicate.strip(), b.object.strip(), b.confidence,
                              b.exclusive, [s.id for s in sources], max(s.ts for s in sources)))
    return kept


async def unread_batch(db: Database, scope: str, channel: str, limit: int) -> list[Source]:
    rows = await records.unread_batch(db, scope, channel, limit)
    return [Source(i + 1, r["id"], r["author"], r["text"], parse_ts(r["ts"])) for i, r in enumerate(rows)]


def _fit_all(beliefs: list[NewBelief]) -> None:
    """Their search tokens (CPU work: run off the event loop)."""
    for belief in beliefs:
        belief.fit()


async def extract_next_batch(db: Database, llm: Any, embedder: Any, lock: asyncio.Lock, scope: str,
                             channel: str, batch_max: int) -> list[str] | None:
    """Read the channel's next batch of unread messages for beliefs, store what passes and mark
    the batch read; returns the worlds whose beliefs changed, or None when nothing was unread.
    ``lock``: the scope's write lock, held while storing."""
    batch = await unread_batch(db, scope, channel, batch_max)
    if not batch:
        return None
    found = await extract_batch(llm, scope, channel, batch)
    if found:
        vectors, _ = await asyncio.gather(embedder.embed([b.text() for b in found]),
                                          run_cpu(_fit_all, found))
    else:
        vectors = []
    async with lock:
        async with db.transaction() as conn:
            touched = await belief_store.store(conn, scope, found, vectors, utcnow())
            await records.mark_read(conn, [s.id for s in batch])
    return sorted(touched)


Runner = Callable[[str, str], Awaitable[int]]   # extracts one batch, returns how many are still unread


class ExtractionScheduler:
    """Starts a channel's extraction when ``every_n`` messages have arrived, or ``every_s`` seconds after
    the first of fewer. A run takes full batches only: a remainder smaller than ``every_n`` waits for
    more messages or the timer, so a trickle during a slow call never turns into one call per message."""

    def __init__(self, run: Runner, every_n: int, every_s: float):
        self._run = run
        self.every_n = every_n
        self.every_s = every_s
        self._pending: dict[tuple[str, str], int] = {}
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task] = {}
        self._again: set[tuple[str, str]] = set()

    def note(self, scope: str, channel: str, count: int = 1) -> None:
        key = (scope, channel)
        self._pending[key] = self._pending.get(key, 0) + count
        if self._pending[key] >= self.every_n:
            self._launch(key)
        else:
            self._arm(key)

    def _arm(self, key: tuple[str, str]) -> None:
        if key not in self._timers:
            self._timers[key] = asyncio.get_running_loop().call_later(self.every_s, self._launch, key)

    def _launch(self, key: tuple[str, str]) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._tasks:
            self._again.add(key)
            return
        task = asyncio.get_running_loop().create_task(self._work(key))
        self._tasks[key] = task

    async def _work(self, key: tuple[str, str]) -> None:
        try:
            while True:
                self._pending.pop(key, None)
                self._again.discard(key)
                try:
                    left = await self._run(*key)
                except asyncio.CancelledError:
                    raise
                except LLMError as err:   # the endpoint is down or unusable: its one line says why
                    log.warning("belief extraction for %s/%s waits for the next batch: %s", *key, err)
                    left = 0
                except Exception:
                    log.exception("belief extraction failed for %s/%s", *key)
                    left = 0
                if left >= self.every_n or key in self._again:
                    continue
                if left:
                    self._pending[key] = left
                    self._arm(key)
                break
        finally:
            self._tasks.pop(key, None)

    async def drain(self) -> None:
        """Start every waiting batch now and wait until none is running."""
        for key in list(self._timers):
            self._launch(key)
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
