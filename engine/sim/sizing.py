"""How many agents and rounds a simulation request becomes, and why.

A request may leave them out (the ``[simulation]`` defaults apply) or ask for more than the
caps allow (``max_agents``, ``max_rounds``: lowered to the cap). ``resolve`` is the one place
that decides, so the confirmation prompt, the estimate and the environment step agree, and
every clamp comes with a note the user is shown before confirming. ``check`` refuses what no
clamp can fix (zero or negative counts) before anything is asked or started.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import SimulationSection
from engine.jobs import JobError


@dataclass(frozen=True)
class Sizes:
    agents: int
    rounds: int
    notes: tuple[str, ...] = ()   # one line per clamp, e.g. "agents capped at 50 (asked 100000; ...)"


def check(agents: int | None, rounds: int | None) -> None:
    """JobError when a count was given and is below 1."""
    if agents is not None and agents < 1:
        raise JobError(f"the number of agents must be at least 1 (got {agents})")
    if rounds is not None and rounds < 1:
        raise JobError(f"the number of rounds must be at least 1 (got {rounds})")


def resolve(sim: SimulationSection, agents: int | None, rounds: int | None) -> Sizes:
    """Defaults for what was not given, caps for what is too large (after ``check``)."""
    notes = []
    chosen_agents, chosen_rounds = agents or sim.default_agents, rounds or sim.default_rounds
    if chosen_agents > sim.max_agents:
        notes.append(f"agents capped at {sim.max_agents} (asked {chosen_agents:,}; "
                     f"[simulation] max_agents)")
        chosen_agents = sim.max_agents
    if chosen_rounds > sim.max_rounds:
        notes.append(f"rounds capped at {sim.max_rounds} (asked {chosen_rounds:,}; "
                     f"[simulation] max_rounds)")
        chosen_rounds = sim.max_rounds
    return Sizes(chosen_agents, chosen_rounds, tuple(notes))
