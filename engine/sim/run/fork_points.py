"""Fork points: each platform's state after every completed round, kept so that a simulation can
be forked at any round (``engine.sim.fork``).

After round r (1-based) the child keeps ``<folder>/<platform>/rounds/<r:04d>/`` holding
``<platform>.db`` (the round's checkpoint copy of the platform database), ``memory.json`` (the
agents' memories) and ``actions.json`` (``{"bytes": length of actions.jsonl once the round's
round_end line is written, "actions": actions logged so far, "trace_rowid": ...}``). The database
and the memories are hard links to the checkpoint files just written: the child replaces its
checkpoint files (``os.replace``) and never writes them in place, so a link copies nothing and
what it points at is final; where a link is impossible the file is copied. A round's folder is
written under a temporary name and renamed, so a folder with the round's number is complete.

Disk budget: ``[simulation] fork_points_mb`` for the whole simulation (all platforms). Above
it, fork points are thinned out instead of failing the run: kept are the latest round and every
k-th, k the smallest power of two that fits (so thinning only ever removes rounds: the multiples
of 2k are among those of k). 0 keeps none; a run that is not live can still be forked at its
last completed round, from its checkpoint (``engine.sim.fork``).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from engine.i18n import _
from engine.sim.run.output import ACTIONS_LOG, CHECKPOINT_DB, MEMORY_FILE, PLATFORMS, platform_dir

ROUNDS_DIR = "rounds"
POINT_ACTIONS = "actions.json"


def point_dir(folder: Path, platform: str, round_no: int) -> Path:
    return platform_dir(folder, platform) / ROUNDS_DIR / f"{round_no:04d}"


def link_or_copy(src: Path | str, dst: Path | str) -> None:
    """A hard link where the file system allows one, else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def available(folder: Path, platform: str) -> list[int]:
    """Rounds (1-based) whose fork point this platform keeps, ascending."""
    base = platform_dir(folder, platform) / ROUNDS_DIR
    try:
        names = os.listdir(base)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def read_point(folder: Path, platform: str, round_no: int) -> dict | None:
    """The ``actions.json`` of a kept fork point, or None when the round is not kept."""
    try:
        return json.loads((point_dir(folder, platform, round_no) / POINT_ACTIONS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def clear(folder: Path, platform: str) -> None:
    """Forget every fork point of the platform (a run that starts over)."""
    shutil.rmtree(platform_dir(folder, platform) / ROUNDS_DIR, ignore_errors=True)


def keep(folder: Path, platform: str, round_no: int, actions: int, trace_rowid: int, budget_mb: float) -> None:
    """Keep the fork point of ``round_no``, just checkpointed and logged; then hold the budget."""
    if budget_mb <= 0:
        clear(folder, platform)
        return
    pdir = platform_dir(folder, platform)
    final = point_dir(folder, platform, round_no)
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    link_or_copy(pdir / CHECKPOINT_DB, tmp / f"{platform}.db")
    link_or_copy(pdir / MEMORY_FILE, tmp / MEMORY_FILE)
    (tmp / POINT_ACTIONS).write_text(json.dumps({
        "bytes": (pdir / ACTIONS_LOG).stat().st_size, "actions": actions, "trace_rowid": trace_rowid}),
        encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    kept = thin(folder, int(budget_mb * 1024 * 1024))
    if kept is not None:
        print(f"fork points above [simulation] fork_points_mb = {budget_mb:g}: thinned out; "
              + "; ".join(f"{p} keeps rounds {describe_rounds(r)}" for p, r in kept.items()), file=sys.stderr)


def _point_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def sizes(folder: Path) -> dict[str, dict[int, int]]:
    """Bytes on disk of each kept fork point: {platform: {round: bytes}}."""
    return {p: {r: _point_bytes(point_dir(folder, p, r)) for r in available(folder, p)}
            for p in PLATFORMS if available(folder, p)}


def thinned(rounds: list[int], k: int) -> list[int]:
    """The rounds kept at spacing ``k``: every k-th and the latest."""
    return [r for r in rounds if r % k == 0 or r == rounds[-1]]


def thin(folder: Path, budget_bytes: int) -> dict[str, list[int]] | None:
    """Remove fork points until they fit in ``budget_bytes``: returns the rounds each platform
    keeps when some were removed, None when everything fits."""
    found = sizes(folder)
    if sum(sum(s.values()) for s in found.values()) <= budget_bytes:
        return None
    k = 1
    while True:
        k *= 2
        kept = {p: thinned(sorted(s), k) for p, s in found.items()}
        total = sum(found[p][r] for p, rounds in kept.items() for r in rounds)
        if total <= budget_bytes or all(len(r) <= 1 for r in kept.values()):
            break
    for p, s in found.items():
        for r in set(s) - set(kept[p]):
            shutil.rmtree(point_dir(folder, p, r), ignore_errors=True)
    return kept


def describe_rounds(rounds: list[int]) -> str:
    """'1-4, 8, 12' for [1, 2, 3, 4, 8, 12]; 'none' (in the current language) for []."""
    if not rounds:
        return _("none")
    parts: list[str] = []
    start = prev = rounds[0]
    for r in rounds[1:]:
        if r != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = r
        prev = r
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)
