"""The read side of a simulation's stances for exports and comparisons.

Table ``sim_stances(sim_id, platform, round, agent_id, score, label)`` is written per completed
round by the stance observer (``engine/sim/stance/tracking.py``): ``round`` counts from 1, ``score`` is in
[-1, 1] and ``label`` is "for", "neutral" or "against". Exports want each author's label in a
round and comparisons the split of both runs per round; both come from one read of the rows.
A split is the stance observer's own ``RoundSplit`` (the type /sim status and the charts use).

A database without the table, or a simulation whose stances were not tracked, reads as no
stances: the callers then leave their belief columns empty rather than show zeros.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.sim.stance.tracking import LABELS, RoundSplit, stances


@dataclass(frozen=True)
class Stance:
    score: float
    label: str


@dataclass
class Beliefs:
    """Every stance of one simulation: (platform, round) -> agent_id -> Stance."""
    rows: dict[tuple[str, int], dict[int, Stance]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def label(self, platform: str, round_no: int, agent_id: int) -> str | None:
        stance = self.rows.get((platform, round_no), {}).get(agent_id)
        return stance.label if stance else None

    def split(self, platform: str, round_no: int) -> RoundSplit | None:
        stances = self.rows.get((platform, round_no))
        if not stances:
            return None
        counts = {label: sum(1 for s in stances.values() if s.label == label) for label in LABELS}
        mean = sum(s.score for s in stances.values()) / len(stances)
        return RoundSplit(platform, round_no, counts["for"], counts["neutral"], counts["against"], round(mean, 3))

    def rounds(self, platform: str) -> list[int]:
        return sorted(r for p, r in self.rows if p == platform)

    def platforms(self) -> list[str]:
        return sorted({p for p, _ in self.rows})

    def agent_scores(self, agent_id: int, from_round: int = 1) -> list[float]:
        """The agent's scores on every platform from ``from_round`` on."""
        return [stances[agent_id].score for (_, r), stances in sorted(self.rows.items())
                if r >= from_round and agent_id in stances]


async def load_beliefs(db, sim_id: str) -> Beliefs:
    """The stances recorded for ``sim_id`` (empty when none were)."""
    beliefs = Beliefs()
    for platform, round_no, agent_id, score, label in await stances(db, sim_id):
        beliefs.rows.setdefault((platform, round_no), {})[agent_id] = Stance(score, label)
    return beliefs
