"""Events injected into a run, as the run logged them.

The run child writes one line per platform when it publishes an injected event, in that
platform's ``actions.jsonl``: ``{"type": "injected", "round": r (0-based, like the other
lines), "id", "source", "text", "asked_by", "post_id"}``. ``post_id`` is the post the source
account wrote in that platform's database. Here rounds count from 1, as users see them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.sim.injections import DEFAULT_SOURCE, published_lines
from engine.sim.report.stats import platforms_of


@dataclass(frozen=True)
class Injected:
    platform: str
    round: int            # 1-based: published at the start of this round
    id: str
    source: str
    text: str
    asked_by: str
    post_id: int | None


def read_injected(sim_dir: Path | str) -> list[Injected]:
    """Every injected event of the run, per platform, in the order logged (blocking)."""
    found: list[Injected] = []
    for platform in platforms_of(Path(sim_dir)):
        for row in published_lines(sim_dir, platform):   # lines a crash cut short are left out
            try:
                post = row.get("post_id")
                found.append(Injected(platform, int(row["round"]) + 1, str(row.get("id", "")),
                                      str(row.get("source") or DEFAULT_SOURCE), str(row.get("text", "")),
                                      str(row.get("asked_by", "")), post if isinstance(post, int) else None))
            except (TypeError, ValueError):
                continue
    return found
