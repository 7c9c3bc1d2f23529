"""Inject an event into a simulation: ``/sim inject <sim> <text> [--round N] [--platform P] [--as NAME]``.

``inject`` checks the request against the simulation's run, appends the event to its
``injections.json`` (``engine.sim.run.injections``) and, when the run's process is live, tells it
(protocol request ``inject``) so it reads the file at once; the child publishes the event at the
start of the round (``engine.sim.run.child.injector``). Rounds count from 1 here, as users see them.

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

from engine.i18n import _
from engine.jobs import JobError
from engine.offload import run_cpu
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.inject.logged import read_injected
from engine.sim.run.executor import RunGone, RunTimeout
from engine.sim.run.injections import DEFAULT_SOURCE, Injection, append_injection, read_injections
from engine.sim.run.output import PLATFORMS
from engine.sim.run.service import SimRuns
from engine.words import joined

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
        raise InjectRefused(_("unknown platform {platform}: use twitter, reddit or both", platform=repr(choice)))
    wanted = enabled if choice == "both" else [choice]
    if not set(wanted) <= set(enabled):
        raise InjectRefused(_("this simulation does not run on {platform}", platform=choice))
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
        raise InjectRefused(_("the event's text is empty: say what happens"))
    if len(text) > MAX_TEXT_CHARS:
        raise InjectRefused(_("the event's text is {chars} characters long; at most {most}", chars=len(text),
                              most=MAX_TEXT_CHARS))
    source = " ".join((source or DEFAULT_SOURCE).split())
    if not source or len(source) > MAX_SOURCE_CHARS:
        raise InjectRefused(_("the source's name must have 1 to {most} characters", most=MAX_SOURCE_CHARS))
    if not (folder / CONFIG_FILE).exists():
        raise InjectRefused(_("simulation {sim} has not prepared its environment yet (step 3); /sim status {sim} "
                              "shows where it is", sim=sim_id))
    cfg = await run_cpu(_config, folder)
    platforms = platforms_of(platform, [p for p in PLATFORMS if getattr(cfg, p).enabled])
    total = min(cfg.time.rounds, runs.settings.max_rounds)
    first = await next_round(runs, sim_id)
    if first > total:
        raise InjectRefused(_("simulation {sim} has run all its {rounds} rounds: there is no round left to inject "
                              "into", sim=sim_id, rounds=total))
    round_no = first if round_no is None else round_no
    if round_no < 1:
        raise InjectRefused(_("rounds count from 1; the next round is {next}", next=first))
    if round_no < first:
        raise InjectRefused(_("round {round} has already begun or is over; the next round is {next}", round=round_no,
                              next=first))
    if round_no > total:
        raise InjectRefused(_("round {round} is beyond the last round ({last}); give --round {next} to {last}",
                              round=round_no, last=total, next=first))
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
        """The event and where it stands, in the current language."""
        e = self.injection
        head = _("📰 round {round} · {source}: {text}", round=e.round, source=e.source, text=e.text[:120])
        if self.published:
            rounds = sorted(set(self.published.values()))
            where = joined([p for p in e.platforms if p in self.published])
            status = (_("published on {platforms} at round {round}", platforms=where, round=rounds[0])
                      if len(rounds) == 1 else
                      _("published on {platforms} at rounds {rounds}", platforms=where,
                        rounds=", ".join(map(str, rounds))))
            missing = [p for p in e.platforms if p not in self.published]
            if missing:
                status += _("; {platforms} still to come", platforms=joined(missing))
        else:
            status = _("scheduled on {platforms}", platforms=joined(list(e.platforms)))
        return f"{head} — {status}" + (_(" · asked by {person}", person=e.asked_by) if e.asked_by else "")


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
