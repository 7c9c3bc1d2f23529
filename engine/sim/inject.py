"""Inject an event into a simulation: ``/sim inject <sim> <text> [--round N] [--platform P] [--as NAME]``.

``inject`` checks the request against the simulation's run, appends the event to its
``injections.json`` (``engine.sim.injections``) and, when the run's process is live, tells it
(protocol request ``inject``) so it reads the file at once; the child publishes the event at the
start of the round (``engine.sim.run.injection``). Rounds count from 1 here, as users see them.

The default round is the next one not yet begun: round 1 before the run starts, the round after
the one under way while it runs, the round after the last completed one while it is stopped
(the resume publishes it). A round already begun, or beyond the run's last round, is refused.
``injection_status`` says of every event whether it is scheduled or went out, where and when.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from engine.jobs import JobError
from engine.offload import run_cpu
from engine.sim.envmodels import CONFIG_FILE, SimulationConfig
from engine.sim.injected import read_injected
from engine.sim.injections import DEFAULT_SOURCE, Injection, append_injection, read_injections
from engine.sim.run.executor import RunGone, RunTimeout
from engine.sim.run.protocol import PLATFORMS
from engine.sim.run.service import SimRuns

MAX_TEXT_CHARS = 1000   # an event is a headline or a short news item, not a document
MAX_SOURCE_CHARS = 50


class InjectRefused(JobError):
    """The request cannot be honoured; the message says why in one line."""


@dataclass(frozen=True)
class Injected:
    """What ``inject`` did: the event, and the platforms on which its round had already begun
    (it then goes out one round late there)."""
    injection: Injection
    late_on: tuple[str, ...] = ()


def _config(folder: Path) -> SimulationConfig:
    return SimulationConfig.model_validate_json((folder / CONFIG_FILE).read_text(encoding="utf-8"))


def platforms_of(choice: str, enabled: list[str]) -> tuple[str, ...]:
    """'twitter' | 'reddit' | 'both' -> the platforms among ``enabled``; InjectRefused otherwise."""
    choice = (choice or "both").strip().lower()
    if choice not in (*PLATFORMS, "both"):
        raise InjectRefused(f"unknown platform {choice!r}: use twitter, reddit or both")
    wanted = enabled if choice == "both" else [choice]
    if not set(wanted) <= set(enabled):
        raise InjectRefused(f"this simulation does not run on {choice}")
    return tuple(p for p in PLATFORMS if p in wanted)


async def next_round(runs: SimRuns, sim_id: str) -> int:
    """The first round (from 1) no platform has begun."""
    state = await runs.get(sim_id)
    if state is None:
        return 1
    done = max(state.rounds_done.values(), default=0)
    # "running": a process (this one or another) has the round after ``done`` under way
    return done + 2 if state.status == "running" else done + 1


async def inject(runs: SimRuns, sim_id: str, folder: Path | str, text: str, *, round_no: int | None = None,
                 platform: str = "both", source: str | None = None, asked_by: str = "") -> Injected:
    """Schedule ``text`` for the start of round ``round_no`` (None: the next round not begun) on
    ``platform``, posted by ``source``. Raises InjectRefused with one line for bad input."""
    folder = Path(folder)
    text = " ".join((text or "").split())
    if not text:
        raise InjectRefused("the event's text is empty: say what happens")
    if len(text) > MAX_TEXT_CHARS:
        raise InjectRefused(f"the event's text is {len(text)} characters long; at most {MAX_TEXT_CHARS}")
    source = " ".join((source or DEFAULT_SOURCE).split())
    if not source or len(source) > MAX_SOURCE_CHARS:
        raise InjectRefused(f"the source's name must have 1 to {MAX_SOURCE_CHARS} characters")
    if not (folder / CONFIG_FILE).exists():
        raise InjectRefused(f"simulation {sim_id} has not prepared its environment yet (step 3); "
                            f"/sim status {sim_id} shows where it is")
    cfg = await run_cpu(_config, folder)
    platforms = platforms_of(platform, [p for p in PLATFORMS if getattr(cfg, p).enabled])
    total = min(cfg.time.rounds, runs.settings.max_rounds)
    first = await next_round(runs, sim_id)
    if first > total:
        raise InjectRefused(f"simulation {sim_id} has run all its {total} rounds: there is no round left "
                            f"to inject into")
    round_no = first if round_no is None else round_no
    if round_no < 1:
        raise InjectRefused(f"rounds count from 1; the next round is {first}")
    if round_no < first:
        raise InjectRefused(f"round {round_no} has already begun or is over; the next round is {first}")
    if round_no > total:
        raise InjectRefused(f"round {round_no} is beyond the last round ({total}); give --round {first} to {total}")
    event = Injection(id=uuid.uuid4().hex[:8], round=round_no, platforms=platforms, source=source, text=text,
                      asked_by=asked_by, asked_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    await run_cpu(append_injection, folder, event)
    return Injected(event, await _tell_child(runs, sim_id, event))


async def _tell_child(runs: SimRuns, sim_id: str, event: Injection) -> tuple[str, ...]:
    """Have a live run read the file now; the platforms that began the event's round without it."""
    handle = await runs.executor.attach(sim_id)
    if handle is None:
        return ()
    try:
        reply = await handle.request("inject", timeout=10.0)
    except (RunGone, RunTimeout, RuntimeError):
        return ()  # it ended or is busy: it reads the file at its next round or resume anyway
    late = reply.get("late") or {}
    return tuple(p for p in event.platforms if event.id in late.get(p, ()))


@dataclass(frozen=True)
class InjectionState:
    injection: Injection
    published: dict[str, int]   # platform -> round (from 1) it went out in

    def describe(self) -> str:
        e = self.injection
        head = f"📰 round {e.round} · {e.source}: {e.text[:120]}"
        if self.published:
            rounds = sorted(set(self.published.values()))
            where = " and ".join(p for p in e.platforms if p in self.published)
            at = f"round {rounds[0]}" if len(rounds) == 1 else "rounds " + ", ".join(map(str, rounds))
            status = f"published on {where} at {at}"
            missing = [p for p in e.platforms if p not in self.published]
            if missing:
                status += f"; {' and '.join(missing)} still to come"
        else:
            status = f"scheduled on {' and '.join(e.platforms)}"
        return f"{head} — {status}" + (f" · asked by {e.asked_by}" if e.asked_by else "")


def injection_status(folder: Path | str) -> list[InjectionState]:
    """Every event of the file, with where and when it was published (blocking). An unreadable
    file lists nothing."""
    folder = Path(folder)
    try:
        events = read_injections(folder)
    except (OSError, ValueError):
        return []
    published: dict[str, dict[str, int]] = {}
    for line in read_injected(folder):
        published.setdefault(line.id, {})[line.platform] = line.round
    return [InjectionState(e, published.get(e.id, {})) for e in events]
