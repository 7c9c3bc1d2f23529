"""Events injected into a run, as the run logged them.

The run child writes one line per platform when it publishes an injected event, in that
platform's ``actions.jsonl``: ``{"type": "injected", "round": r (0-based, like the other
lines), "id", "source", "text", "asked_by", "post_id"}``. ``post_id`` is the post the source
account wrote in that platform's database.

``read_injected`` is the one reader of those lines: one ``Injected`` per platform line, rounds
counted from 1 as users see them (exports, comparisons). ``injected_events`` groups them into
one ``InjectedEvent`` per event across platforms, rounds from 0 like the run's log (the report's
statistics and charts, which mark the round an event went out in).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from engine.sim.run.injections import DEFAULT_SOURCE, published_lines
from engine.sim.run.output import PLATFORMS


@dataclass(frozen=True)
class Injected:
    platform: str
    round: int            # 1-based: published at the start of this round
    id: str
    source: str
    text: str
    asked_by: str
    post_id: int | None


@dataclass
class InjectedEvent:
    """An event injected into the run, as published (rounds from 0, like the log's)."""
    id: str
    round: int                       # the first round it went out in
    source: str
    text: str
    asked_by: str
    posts: dict[str, int] = field(default_factory=dict)   # platform -> post id

    def cites(self) -> str:
        return " ".join(f"[{p} post {pid}]" for p, pid in self.posts.items())


def read_injected(sim_dir: Path | str, platforms: Iterable[str] = PLATFORMS) -> list[Injected]:
    """Every injected event of the run on ``platforms`` (a platform that did not run has no log),
    per platform, in the order logged (blocking)."""
    found: list[Injected] = []
    for platform in platforms:
        for row in published_lines(sim_dir, platform):   # lines a crash cut short are left out
            try:
                post = row.get("post_id")
                found.append(Injected(platform, int(row["round"]) + 1, str(row.get("id", "")),
                                      str(row.get("source") or DEFAULT_SOURCE), str(row.get("text", "")),
                                      str(row.get("asked_by", "")), post if isinstance(post, int) else None))
            except (TypeError, ValueError):
                continue
    return found


def injected_events(sim_dir: Path | str, platforms: Iterable[str] = PLATFORMS) -> list[InjectedEvent]:
    """The injected events the platforms' logs record, one per event, in the order they went out."""
    events: dict[str, InjectedEvent] = {}
    for line in read_injected(sim_dir, platforms):
        event = events.setdefault(line.id, InjectedEvent(line.id, line.round - 1, line.source, line.text,
                                                         line.asked_by))
        event.round = min(event.round, line.round - 1)
        if line.post_id is not None:
            event.posts[line.platform] = line.post_id
    return sorted(events.values(), key=lambda e: e.round)  # stable: the order they went out in
