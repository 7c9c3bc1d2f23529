"""The seed brief of a simulation started without a document, and how it reads as one.

A ``Brief`` is either drafted by the LLM from the requirement (``origin`` "drafted": its text is
``body``) or taken from this chat's memory (``origin`` "memory": its ``lines``, each a message
with who wrote it and when, or a belief with who said what it rests on). ``render`` writes it as
the Markdown document the pipeline reads (``documents/brief.md``); a brief from memory is
rendered again from the lines left whenever some are forgotten (engine.sim.seed.store).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from engine.i18n import _
from engine.words import in_english, plural

FILE = "brief.md"
MESSAGE_CHARS = 1000      # a message is cut to this many characters in a brief


@dataclass(frozen=True)
class BriefLine:
    kind: str                      # "message" or "belief"
    source_id: int                 # its memory id: memory_messages.id or beliefs.id
    sources: tuple[int, ...]       # the messages it rests on (a message: itself)
    author: str                    # who said it; a belief: who said what it rests on
    ts: datetime                   # when it was said; a belief: when the brief was taken
    text: str


@dataclass
class Brief:
    origin: str                    # "drafted" or "memory"
    source: str                    # what it was made from, as a person reads it
    built_at: datetime
    body: str = ""                 # a drafted brief's text
    lines: list[BriefLine] = field(default_factory=list)
    left_out: int = 0              # messages of members who opted out of memory
    more: bool = False             # older messages than the brief may hold were left out
    zone: str = "UTC"              # the time zone its times are written in
    removed: int = 0               # lines forgotten before a run read it (gone from it)
    audience: str = ""             # the audience of what it was taken from (engine.memory.audience)

    @property
    def messages(self) -> list[BriefLine]:
        return [line for line in self.lines if line.kind == "message"]

    @property
    def beliefs(self) -> list[BriefLine]:
        return [line for line in self.lines if line.kind == "belief"]

    def describe(self) -> str:
        """One line for the chat: what the brief is."""
        if self.origin == "drafted":
            return _("drafted by the LLM from the question")
        return _("taken from this chat's memory of {source}: {messages} and {beliefs}", source=self.source,
                 messages=plural(len(self.messages), "{n} message", "{n} messages"),
                 beliefs=plural(len(self.beliefs), "{n} belief", "{n} beliefs"))

    def render(self) -> str:
        if self.origin == "drafted":
            return self.body
        zone = ZoneInfo(self.zone)
        messages, beliefs = self.messages, self.beliefs
        span = ""
        if messages:
            first, last = (f"{m.ts.astimezone(zone):%Y-%m-%d}" for m in (messages[0], messages[-1]))
            span = f" written on {first}" if first == last else f" written between {first} and {last}"
        notes = []
        if self.more:
            notes.append("Older messages were left out: this is the latest part.")
        if self.left_out:
            notes.append(f"{in_english(self.left_out, '{n} message', '{n} messages')} of members who turned memory "
                         "off for themselves were left out.")
        parts = [f"# What this chat said: {self.source}", "",
                 f"A snapshot of this chat's memory taken {self.built_at.astimezone(zone):%Y-%m-%d %H:%M} "
                 f"({self.zone}): {in_english(len(messages), '{n} message', '{n} messages')}{span}"
                 + (f", and {in_english(len(beliefs), '{n} belief', '{n} beliefs')} the chat's memory holds about them"
                    if beliefs else "")
                 + ". Every message is quoted as its author wrote it, with who and when."
                 + "".join(f" {n}" for n in notes)]
        if not self.lines:
            parts += ["", "Nothing is left of it: its lines were forgotten at their authors' request."]
        if beliefs:
            parts += ["", "## What the chat holds to be true", ""]
            parts += [f"- {b.text}" + (f" (from what {b.author} said)" if b.author else "") for b in beliefs]
        if messages:
            parts += ["", "## Who said what"]
            day = None
            for m in messages:
                local = m.ts.astimezone(zone)
                if f"{local:%Y-%m-%d}" != day:
                    day = f"{local:%Y-%m-%d}"
                    parts += ["", f"### {local:%A} {day}", ""]
                parts.append(f"- {local:%H:%M} {m.author}: {m.text}")
        return "\n".join(parts) + "\n"


def one_line(text: str) -> str:
    """A message as one line of a brief: its line breaks folded, cut to ``MESSAGE_CHARS``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[:MESSAGE_CHARS - 1] + "…"


def write(brief: Brief, folder: Path) -> Path:
    """Write the brief as ``documents/brief.md`` of the simulation's folder, whole or not at all
    (a run that starts reading it meanwhile reads one version)."""
    path = folder / "documents" / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{FILE}.partial")
    partial.write_text(brief.render(), encoding="utf-8")
    os.replace(partial, path)
    return path
