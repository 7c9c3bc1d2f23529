"""The shapes memory works with: incoming messages, worlds and beliefs."""
from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

_ID_ALPHABET = string.ascii_lowercase + string.digits


def new_world_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(ts: datetime) -> str:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc).isoformat(timespec="microseconds")


def aware(ts: datetime) -> datetime:
    """A naive timestamp read as UTC."""
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def belief_text(subject: str, predicate: str, obj: str) -> str:
    """What a belief's vector is computed from."""
    return f"{subject} {predicate} {obj}"


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with each lone surrogate (JSON's "\\ud800", which Telegram, Discord and an export
    may carry) and each NUL replaced by U+FFFD: neither database, the tokenizer nor the language
    detector takes a lone surrogate, PostgreSQL refuses NUL in text (SQLite keeps it), and a
    message that holds either would fail its whole batch, then be skipped."""
    return _UNSTORABLE.sub("\ufffd", text)


def to_blob(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype=np.float32).tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


def maturity(avg_confidence: float, beliefs: int) -> float:
    """avg belief confidence x min(beliefs / 10, 1): 0 for a new world, 1 for a settled one."""
    if beliefs <= 0:
        return 0.0
    return float(avg_confidence) * min(beliefs / 10.0, 1.0)


@dataclass
class MemoryMessage:
    scope: str
    channel: str
    message_id: str
    author: str
    text: str
    ts: datetime = field(default_factory=utcnow)
    author_id: str = ""  # the platform's id of the author ('' for imported history)
    audience: str | None = None   # who can read its channel ('' everyone); None: as recorded for the channel
    attachments: tuple[str, ...] = ()   # names and captions of its attached files, searchable with its text

    def __post_init__(self) -> None:
        self.channel, self.message_id = storable(self.channel), storable(self.message_id)
        self.author, self.author_id, self.text = storable(self.author), storable(self.author_id), storable(self.text)
        self.attachments = tuple(storable(a) for a in self.attachments)


@dataclass
class WorldState:
    """What routing needs to know about a world, kept in memory per scope (its centroid
    lives in the scope's index)."""
    id: str
    access_count: int
    evidence: int = 0             # messages it holds
    topic_size: int = 0           # evidence count when its topic was last named
    maturity: float = 0.0
    audience: str = ""            # who may see it ('' every member of the scope)


@dataclass
class Belief:
    id: int
    world_id: str
    subject: str
    predicate: str
    object: str
    confidence: float
    sources: list[int]
    learned_at: datetime
    valid_from: datetime
    invalid_at: datetime | None = None
    superseded_by: int | None = None
    retired_at: datetime | None = None   # set when its confidence decayed below the floor (history only)
    score: float = 0.0            # relevance to the query that found it (higher is better); 0 when not ranked

    @property
    def active(self) -> bool:
        return self.invalid_at is None

    def text(self) -> str:
        return belief_text(self.subject, self.predicate, self.object)


@dataclass(frozen=True)
class Forgotten:
    """What one act of forgetting removed from a scope: the ids of its messages and beliefs
    (engine.memory.storage). ``MemoryEngine.on_forget`` listeners get it, to remove the copies
    kept elsewhere (the lines of a simulation's brief)."""
    scope: str
    messages: frozenset[int] = frozenset()
    beliefs: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.messages or self.beliefs)


@dataclass
class Evidence:
    id: int
    world_id: str
    channel: str
    message_id: str
    author: str
    text: str
    ts: datetime
    score: float = 0.0            # relevance to the query that found it (higher is better); 0 when not ranked
    world_topic: str = ""
    neighbour_of: int | None = None   # the hit this turn was brought in to complete, if any


@dataclass
class WorldInfo:
    id: str
    scope: str
    topic: str
    maturity: float
    access_count: int
    beliefs: int
    evidence: int
    created_at: datetime
    last_active: datetime
    audience: str = ""
    archived_at: datetime | None = None   # archived: out of routing, /worlds and digests; its messages recallable


@dataclass
class RouteResult:
    world_id: str
    action: str                   # 'birth', 'absorb' or 'follow'
    similarity: float


@dataclass
class RecallResult:
    world: WorldInfo | None       # the world the query is nearest to: context, never a filter
    similarity: float
    beliefs: list[Belief]
    evidence: list[Evidence]      # best first; neighbour turns count towards k
    worlds: dict[str, WorldInfo] = field(default_factory=dict)   # every world a result comes from

    @property
    def found(self) -> bool:
        """False when nothing reached the relevance floor: memory holds nothing about the query."""
        return bool(self.beliefs or self.evidence)


@dataclass
class AskResult:
    answer: str | None            # None when no LLM is configured
    recall: RecallResult
