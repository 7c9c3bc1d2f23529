"""Where two runs part: the first round whose logged actions differ.

A fork replays nothing: its ``actions.jsonl`` starts as a copy of the parent's up to the fork
round, so the two logs agree line for line on those rounds and differ from the first round
the fork played (or the one an event was injected into). Two runs of the same folder with
different seeds differ from round 1. The lineage columns of a fork would say the same; this
reads it from the logs so any two runs can be compared.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from engine.sim.inject.logged import Injected
from engine.sim.run.output import actions_log, platforms_of, read_log


def _rounds(sim_dir: Path, injected: list[Injected]) -> dict[tuple[str, int], Counter]:
    """(platform, round from 1) -> the multiset of what happened in it."""
    out: dict[tuple[str, int], Counter] = {}
    for platform in platforms_of(sim_dir):
        actions, rounds_done, _ = read_log(actions_log(sim_dir, platform))
        for rnd in range(1, rounds_done + 1):
            out.setdefault((platform, rnd), Counter())
        for a in actions:
            out.setdefault((platform, a["round"] + 1), Counter())[
                (a.get("agent_id"), a["action"], json.dumps(a.get("info"), sort_keys=True))] += 1
    for event in injected:
        out.setdefault((event.platform, event.round), Counter())[("injected", event.text, event.source)] += 1
    return out


def shared_rounds(dir_a: Path | str, dir_b: Path | str, injected_a: list[Injected],
                  injected_b: list[Injected]) -> int:
    """How many rounds from round 1 on the two runs played alike on every platform (blocking).

    0: they differ from round 1 (compare them from there); the comparison of what differs
    starts at the round after the shared ones."""
    a, b = _rounds(Path(dir_a), injected_a), _rounds(Path(dir_b), injected_b)
    last = min(max((r for _, r in a), default=0), max((r for _, r in b), default=0))
    platforms = {p for p, _ in a} | {p for p, _ in b}
    for rnd in range(1, last + 1):
        if any(a.get((p, rnd), Counter()) != b.get((p, rnd), Counter()) for p in platforms):
            return rnd - 1
    return last
