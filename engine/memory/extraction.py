"""Belief extraction by the LLM, in batches per channel, off the message path.

``ExtractionScheduler.note`` is all that ingest does: it counts the channel's new messages and
starts a batch in the background after ``every_n`` of them, or ``every_s`` seconds after the
first one, whichever comes first. One batch runs per channel at a time; messages arriving
meanwhile start another one after it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You extract durable facts from a chat so a bot can remember them.
Read the numbered messages and return beliefs as (subject, predicate, object) triples:
- subject and object are short noun phrases (people, things, places, projects, dates);
  predicate is a short verb phrase ("lives in", "prefers", "is scheduled for").
- Only facts stated or clearly implied by the messages; no opinions about the chat itself,
  no greetings, no questions.
- confidence: 0.9+ when stated plainly, 0.5-0.8 when implied or hedged.
- exclusive: true when the subject can hold only one object for this predicate at a time
  (lives in, works at, meeting is on, version is), so a new value replaces the old one.
- sources: the numbers of the messages the belief comes from.
Return an empty list when nothing is worth remembering."""


class ExtractedBelief(BaseModel):
    subject: str
    predicate: str
    object: str
    confidence: float = Field(0.8, ge=0.0, le=1.0)
    exclusive: bool = False
    sources: list[int] = Field(default_factory=list)


class Extraction(BaseModel):
    beliefs: list[ExtractedBelief] = Field(default_factory=list)


def prompt(numbered: list[tuple[int, str, str]], topic: str) -> list[dict]:
    """numbered: (number, author, text) in chat order."""
    lines = "\n".join(f"[{n}] {author}: {text}" for n, author, text in numbered)
    about = f"Conversation topic: {topic}\n\n" if topic else ""
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{about}Messages:\n{lines}"}]


Runner = Callable[[str, str], Awaitable[None]]


class ExtractionScheduler:
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
        elif key not in self._timers:
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
                try:
                    await self._run(*key)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("belief extraction failed for %s/%s", *key)
                if key not in self._again:
                    break
                self._again.discard(key)
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
