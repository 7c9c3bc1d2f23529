"""The records of a simulation's knowledge graph, and the name and keyword rules they match by.

``NewEntity``/``NewEdge`` are what entity resolution hands to ``GraphStore.replace``;
``EntityRecord``, ``Fact`` and ``SearchHit`` are what its reading API returns (each with
``to_dict()`` for tool answers).
"""
from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field
from typing import Any

_STOP = {"the", "and", "for", "with", "that", "this", "from", "what", "who", "how", "why", "are", "was",
         "were", "will", "does", "did", "about", "into", "over", "their", "they", "them", "its", "his",
         "her", "has", "have", "had", "not", "but", "all", "any", "can", "say", "said", "which", "when"}
_TITLES = (r"^(?:the|mr|mrs|ms|dr|prof|professor|sir|dame|madam|president|prime minister|minister|senator|"
           r"governor|mayor|councillor|councilor|judge|chief|general|ceo|chairman|chairwoman|rep)\.?\s+")


@functools.lru_cache(maxsize=1 << 16)  # entity resolution asks again for every mention and relation
def normalise_name(name: str) -> str:
    """Lower-case, no punctuation, no leading title or article, no possessive: for matching."""
    text = name.lower().strip()
    text = re.sub(r"['’]s\b", "", text)
    text = re.sub(r"[^\w\s]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    previous = None
    while previous != text:
        previous, text = text, re.sub(_TITLES, "", text)
    return text


def keywords(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 3 and w not in _STOP}


@dataclass
class EntityRecord:
    id: int
    name: str
    type: str
    summary: str
    attributes: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    mentions: int = 1
    degree: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Fact:
    id: int
    source: str
    relation: str
    target: str
    fact: str
    valid_at: str | None = None
    invalid_at: str | None = None

    @property
    def valid(self) -> bool:
        return not self.invalid_at

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchHit:
    kind: str  # "entity" or "fact"
    score: float
    text: str
    entity: EntityRecord | None = None
    fact: Fact | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "score": round(self.score, 4), "text": self.text,
                **({"entity": self.entity.to_dict()} if self.entity else {}),
                **({"fact": self.fact.to_dict()} if self.fact else {})}


@dataclass
class NewEntity:
    name: str
    type: str
    summary: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    mentions: int = 1


@dataclass
class NewEdge:
    source: int  # index into the list of NewEntity
    target: int
    relation: str
    fact: str
    valid_at: str | None = None
    invalid_at: str | None = None
    chunk: int | None = None
