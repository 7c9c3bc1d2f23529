"""What changed in memory since a moment, as typed entries: the daily digest's memory part.

Every entry names the topic of the world it concerns, and only worlds the viewer sees appear
(the caller passes those worlds in ``visible``): a digest posted in a channel never mentions
what that channel's audience cannot read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from engine.db import Database
from engine.memory import beliefs as belief_store, records
from engine.memory.audience import Viewer
from engine.memory.models import WorldInfo, iso


@dataclass(frozen=True)
class WorldNews:
    """A world born (new) or grown since the digest's start."""
    id: str
    topic: str
    added: int        # messages it received since then
    messages: int     # messages it holds now
    beliefs: int
    maturity: float


@dataclass(frozen=True)
class BeliefNews:
    """A belief learned since the digest's start and still valid."""
    id: int
    world_id: str
    topic: str
    text: str         # "subject predicate object"
    confidence: float


@dataclass(frozen=True)
class Supersession:
    """A belief replaced by a newer, contradicting one."""
    world_id: str
    topic: str
    old: str
    new: str
    invalid_at: str


@dataclass(frozen=True)
class MergeNews:
    """A world absorbed into a near-identical one."""
    kept_id: str
    kept_topic: str   # '' when the kept world is gone meanwhile
    absorbed_id: str
    absorbed_topic: str
    similarity: float


@dataclass
class Digest:
    new_worlds: list[WorldNews] = field(default_factory=list)
    grown_worlds: list[WorldNews] = field(default_factory=list)
    new_beliefs: list[BeliefNews] = field(default_factory=list)
    superseded_beliefs: list[Supersession] = field(default_factory=list)
    merges: list[MergeNews] = field(default_factory=list)


async def digest(db: Database, viewer: Viewer, visible: dict[str, WorldInfo], since: datetime) -> Digest:
    """New and grown worlds, new and superseded beliefs and merges since ``since`` (aware), among
    the ``visible`` worlds (id -> info) of ``viewer``'s scope."""
    scope, since_s = viewer.scope, iso(since)
    out = Digest()
    for r in await records.messages_per_world_since(db, scope, since_s):
        w = visible.get(r["world_id"])
        if w is not None:
            entry = WorldNews(w.id, w.topic, r["n"], w.evidence, w.beliefs, round(w.maturity, 3))
            (out.new_worlds if w.created_at >= since else out.grown_worlds).append(entry)
    out.new_beliefs = [
        BeliefNews(r["id"], r["world_id"], visible[r["world_id"]].topic,
                   f"{r['subject']} {r['predicate']} {r['object']}", round(r["confidence"], 2))
        for r in await belief_store.learned_since(db, scope, since_s)
        if r["world_id"] in visible]
    out.superseded_beliefs = [
        Supersession(r["world_id"], visible[r["world_id"]].topic, f"{r['os']} {r['op']} {r['oo']}",
                     f"{r['ns']} {r['np']} {r['no']}", r["invalid_at"])
        for r in await belief_store.superseded_since(db, scope, since_s)
        if r["world_id"] in visible and r["new_world"] in visible]
    sees, seen = viewer.where("audience")
    out.merges = [
        MergeNews(r["kept_id"], visible[r["kept_id"]].topic if r["kept_id"] in visible else "",
                  r["absorbed_id"], r["absorbed_topic"], round(r["similarity"], 3))
        for r in await records.merges_since(db, scope, sees, seen, since_s)]
    return out
