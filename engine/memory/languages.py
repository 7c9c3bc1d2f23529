"""The language memory's LLM calls ask for: an answer in the asker's, the rest in the messages'.

- ``/ask`` (``of_question``): the question's language. A question too short or unclear to tell
  (fastText gives "O que decidimos sobre o vazamento na garagem?" only 0.49 Portuguese, the rest
  to Galician and Spanish) takes the dominant language of the channel it is asked in (its latest
  ``SAMPLE`` messages), then English.
- ``/catchup``, belief extraction and world names (``of_texts``): the language most of the
  messages concerned are in, then English; a belief is kept in the language of its messages.
- A question to a simulation's report agent: the question's language, else the simulation's
  (engine.sim.report.chat).

Each prompt then says so with the language's English name (engine.language); what a text is
written in is read by engine.memory.terms, the one detector. Detection runs off the event loop
(its models load on first use).
"""
from __future__ import annotations

from typing import Iterable

from engine import language
from engine.db import Database
from engine.memory import records, terms
from engine.offload import run_cpu

SAMPLE = 40        # a channel's latest messages its language is read from


def _named(code: str | None) -> str | None:
    """``code`` when a prompt can name it (a detected code CLDR does not know is no answer)."""
    return code if code is not None and language.known(code) else None


def of_text(text: str) -> str | None:
    """The language ``text`` is surely in; None when it is too short or unclear to tell. Blocking."""
    return _named(terms.sure_language(text))


def of_texts(texts: Iterable[str]) -> str:
    """The language most of ``texts`` are in; English when none can be told. Blocking: call it
    through ``run_cpu`` (or inside work already there)."""
    return _named(terms.dominant_language(texts)) or language.DEFAULT


async def channel_language(db: Database, scope: str, channel: str) -> str | None:
    """The language most of the channel's latest messages are in; None when none can be told."""
    rows = await records.latest_texts(db, scope, channel, SAMPLE)
    return _named(await run_cpu(terms.dominant_language, [r["text"] for r in rows])) if rows else None


async def of_question(db: Database, scope: str, channel: str | None, question: str) -> str:
    """The language an answer to ``question`` is written in (see the module's docstring)."""
    found = await run_cpu(of_text, question)
    if found is None and channel:
        found = await channel_language(db, scope, channel)
    return found or language.DEFAULT
