"""The injections file of a simulation: events to publish into its run, ``<folder>/injections.json``.

A JSON list of objects, one per event::

    {"id": str, "round": int, "platforms": ["twitter", "reddit"], "source": str, "text": str,
     "asked_by": str, "asked_at": ISO time}

``round`` counts from 1 (the event is published at the start of that round), ``source`` is the
display name of the account that posts it. The engine appends to the file (``/sim inject``,
forks with an event); the run's child re-reads it at the start of every round, so a resume or a
fork sees every event. The file is replaced atomically under a lock, so two writers never lose
each other's event and a reader never sees half a file. What was published, and when, is not
kept here but in each platform's ``actions.jsonl`` (``injected`` lines, see
``engine.sim.run.child.injector``).
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from engine.sim.run.output import INJECTED, actions_log, log_rows

INJECTIONS_FILE = "injections.json"
DEFAULT_SOURCE = "News Desk"


@dataclass(frozen=True)
class Injection:
    id: str
    round: int                 # 1-based
    platforms: tuple[str, ...]
    source: str
    text: str
    asked_by: str = ""
    asked_at: str = ""

    def to_dict(self) -> dict:
        return {**asdict(self), "platforms": list(self.platforms)}

    @classmethod
    def from_dict(cls, d: dict) -> "Injection":
        return cls(id=str(d["id"]), round=int(d["round"]), platforms=tuple(str(p) for p in d["platforms"]),
                   source=str(d.get("source") or DEFAULT_SOURCE), text=str(d["text"]),
                   asked_by=str(d.get("asked_by") or ""), asked_at=str(d.get("asked_at") or ""))


def injections_path(folder: Path | str) -> Path:
    return Path(folder) / INJECTIONS_FILE


def read_injections(folder: Path | str) -> list[Injection]:
    """The events of the file in the order they were asked for; [] without a file. Raises
    ValueError when the file is not a list of events (a reader decides what that means)."""
    path = injections_path(folder)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    if not isinstance(data, list):
        raise ValueError(f"{path} holds no list of events")
    try:
        return [Injection.from_dict(d) for d in data]
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: an event lacks a field or has a bad value ({err})") from None


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / (INJECTIONS_FILE + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def append_injection(folder: Path | str, injection: Injection) -> list[Injection]:
    """Add one event to the file, atomically; returns every event now in it (blocking: call
    off the event loop)."""
    folder = Path(folder)
    with _locked(folder):
        events = [*read_injections(folder), injection]
        path = injections_path(folder)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps([e.to_dict() for e in events], ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    return events


def published_lines(folder: Path | str, platform: str) -> list[dict]:
    """The ``injected`` lines of one platform's actions.jsonl, in order (rounds from 0); broken
    lines (a crash can cut the last one short) are left out."""
    return [row for row in log_rows(actions_log(folder, platform), containing=(f'"{INJECTED}"',))
            if row.get("type") == INJECTED and "id" in row and "round" in row]
