"""How many agents, rounds and runs a simulation request becomes, and why.

A request may leave them out (the ``[simulation]`` defaults apply; one run) or ask for more than
the caps allow (``max_agents``, ``max_rounds``, ``max_runs``: lowered to the cap). ``resolve`` is the one place
that decides, so the confirmation prompt, the estimate and the environment step agree, and
every clamp comes with a note the user is shown before confirming. ``check`` refuses what no
clamp can fix (zero or negative counts) before anything is asked or started.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import SimulationSection
from engine.i18n import _, number
from engine.jobs import JobError


@dataclass(frozen=True)
class Sizes:
    agents: int
    rounds: int
    runs: int = 1                 # step 4 is run this many times (engine.sim.ensemble)
    notes: tuple[str, ...] = ()   # one line per clamp, e.g. "agents capped at 50 (asked 100,000; ...)"


def check(agents: int | None, rounds: int | None, runs: int | None = None) -> None:
    """JobError when a count was given and is below 1."""
    if agents is not None and agents < 1:
        raise JobError(_("the number of agents must be at least 1 (got {agents})", agents=agents))
    if rounds is not None and rounds < 1:
        raise JobError(_("the number of rounds must be at least 1 (got {rounds})", rounds=rounds))
    if runs is not None and runs < 1:
        raise JobError(_("the number of runs must be at least 1 (got {runs})", runs=runs))


def resolve(sim: SimulationSection, agents: int | None, rounds: int | None, runs: int | None = None) -> Sizes:
    """Defaults for what was not given, caps for what is too large (after ``check``)."""
    notes = []
    chosen_agents, chosen_rounds = agents or sim.default_agents, rounds or sim.default_rounds
    if chosen_agents > sim.max_agents:
        notes.append(_("agents capped at {most} (asked {asked}; [simulation] max_agents)", most=number(sim.max_agents),
                       asked=number(chosen_agents)))
        chosen_agents = sim.max_agents
    if chosen_rounds > sim.max_rounds:
        notes.append(_("rounds capped at {most} (asked {asked}; [simulation] max_rounds)", most=number(sim.max_rounds),
                       asked=number(chosen_rounds)))
        chosen_rounds = sim.max_rounds
    chosen_runs = runs or 1
    if chosen_runs > sim.max_runs:
        notes.append(f"runs capped at {sim.max_runs} (asked {chosen_runs:,}; [simulation] max_runs)")
        chosen_runs = sim.max_runs
    return Sizes(chosen_agents, chosen_rounds, chosen_runs, tuple(notes))
