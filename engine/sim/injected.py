"""Events injected into a run, as the run logged them.

The run child writes one line per platform when it publishes an injected event, in that
platform's ``actions.jsonl``: ``{"type": "injected", "round": r (0-based, like the other
lines), "id", "source", "text", "asked_by", "post_id"}``. ``post_id`` is the post the source
account wrote in that platform's database. Here rounds count from 1, as users see them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.sim.report.stats import ACTIONS_LOG, platforms_of


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
        path = Path(sim_dir) / platform / ACTIONS_LOG
        if not path.exists():
            continue
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if '"injected"' not in line:
                    continue
                try:
                    row = json.loads(line)
                    if row.get("type") != "injected":
                        continue
                    post = row.get("post_id")
                    found.append(Injected(platform, int(row["round"]) + 1, str(row.get("id", "")),
                                          str(row.get("source") or "News Desk"), str(row.get("text", "")),
                                          str(row.get("asked_by", "")), post if isinstance(post, int) else None))
                except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                    continue   # a line cut short by a crash
    return found
