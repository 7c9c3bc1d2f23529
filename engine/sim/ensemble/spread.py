"""The spread of an ensemble's beliefs: what the runs agree on, and how sure that is.

Free functions over plain values (each run's stance rows), tested on runs whose outcome is known.
A run's split in a round counts its agents on both platforms together (``combine``); its shares
are the camps' fractions of the agents classified in that round.

- per round, each camp's share as the median over the runs that reached the round, with its
  range (lowest and highest run): ``bands``;
- how a run ends: the camp with the largest share in its last classified round (``camp_of``; a
  tie between the largest camps ends it ``neutral``: no side ahead), and from which round it held
  that camp to the end (``settled_round``);
- how many runs end for / against / neutral, the majority camp (more than half the runs; none
  otherwise), the outliers (the runs that end elsewhere) and, agent by agent (the same personas
  in every run), whose final stance differs most between the majority and the outliers;
- where the runs part: the first round in which their leading camps differ, or in which a camp's
  share differs by more than ``PART`` between two runs (``parting_round``);
- the median-most run: the one whose final mean score is nearest the median of the runs' (the run
  a report reads posts from, a fork starts from by default);
- the confidence line: "4 of 5 runs: most agents against by round 6", or that no outcome has a
  majority. Never more certain than the runs: the number that agree is always in it, and an
  ensemble of fewer than ``FEW_RUNS`` runs is called a weak signal. It is written in the current
  language (engine.i18n), for the chat and the report; a prompt takes its English copy, the same
  function called under English (``engine.i18n.english(spread.confidence_line)``).
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from engine.i18n import N_, _, number, percent
from engine.sim.stance.tracking import LABELS, RoundSplit
from engine.words import plural

PART = 0.25        # a camp's share differing this much between two runs in a round: they have parted
FEW_RUNS = 3       # fewer runs than this: the confidence line says the signal is weak
CAMP_WORDS = {"for": N_("for"), "against": N_("against"), "neutral": N_("neutral or undecided")}
Scores = list[tuple[str, int, int, float]]   # (platform, round, agent_id, score), as sim_stances holds them


def camp_word(camp: str) -> str:
    """A camp ("for", "against", "neutral") as the confidence line names it, in the current language."""
    return _(CAMP_WORDS[camp])


@dataclass(frozen=True)
class Split:
    """One run's split in one round, both platforms together."""
    for_: int
    neutral: int
    against: int
    mean: float

    @property
    def total(self) -> int:
        return self.for_ + self.neutral + self.against

    def shares(self) -> dict[str, float]:
        total = self.total or 1
        return {"for": self.for_ / total, "neutral": self.neutral / total, "against": self.against / total}


@dataclass
class RunBeliefs:
    """One run: its number, its simulation id, its split per round and each agent's final score."""
    run_no: int
    sim_id: str
    rounds: dict[int, Split] = field(default_factory=dict)
    finals: dict[int, float] = field(default_factory=dict)

    @property
    def last(self) -> int:
        return max(self.rounds, default=0)


def combine(splits: list[RoundSplit]) -> dict[int, Split]:
    """A run's per-platform splits as one split per round."""
    out: dict[int, list[RoundSplit]] = {}
    for s in splits:
        out.setdefault(s.round, []).append(s)
    combined = {}
    for rnd, parts in sorted(out.items()):
        total = sum(p.total for p in parts)
        mean = sum(p.mean * p.total for p in parts) / total if total else 0.0
        combined[rnd] = Split(sum(p.for_ for p in parts), sum(p.neutral for p in parts),
                              sum(p.against for p in parts), round(mean, 3))
    return combined


def final_scores(scores: Scores) -> dict[int, float]:
    """Each agent's final score: the mean over platforms of its latest score on each."""
    latest: dict[tuple[str, int], tuple[int, float]] = {}
    for platform, rnd, agent, score in scores:
        if latest.get((platform, agent), (-1, 0.0))[0] < rnd:
            latest[(platform, agent)] = (rnd, score)
    per_agent: dict[int, list[float]] = {}
    for (_platform, agent), (_round, score) in latest.items():
        per_agent.setdefault(agent, []).append(score)
    return {a: sum(v) / len(v) for a, v in per_agent.items()}


def run_beliefs(run_no: int, sim_id: str, splits: list[RoundSplit], scores: Scores) -> RunBeliefs:
    return RunBeliefs(run_no, sim_id, combine(splits), final_scores(scores))


def camp_of(split: Split) -> str:
    """The largest camp; a tie between the largest is ``neutral`` (no side ahead)."""
    shares = split.shares()
    top = max(shares.values())
    leaders = [c for c in LABELS if shares[c] == top]
    return leaders[0] if len(leaders) == 1 else "neutral"


def settled_round(run: RunBeliefs) -> int | None:
    """The first round from which the run's leading camp stayed its final camp; None without rounds."""
    if not run.rounds:
        return None
    rounds = sorted(run.rounds)
    final = camp_of(run.rounds[rounds[-1]])
    settled = rounds[-1]
    for rnd in reversed(rounds):
        if camp_of(run.rounds[rnd]) != final:
            break
        settled = rnd
    return settled


@dataclass(frozen=True)
class Band:
    """One round over the runs: each camp's median share and range, over ``runs`` runs."""
    round: int
    runs: int
    median: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    mean: tuple[float, float, float]       # the mean score: median, lowest, highest


def bands(runs: list[RunBeliefs]) -> list[Band]:
    rounds = sorted({r for run in runs for r in run.rounds})
    out = []
    for rnd in rounds:
        splits = [run.rounds[rnd] for run in runs if rnd in run.rounds]
        shares = [s.shares() for s in splits]
        means = [s.mean for s in splits]
        out.append(Band(rnd, len(splits), {c: statistics.median(x[c] for x in shares) for c in LABELS},
                        {c: min(x[c] for x in shares) for c in LABELS}, {c: max(x[c] for x in shares) for c in LABELS},
                        (statistics.median(means), min(means), max(means))))
    return out


def parting_round(runs: list[RunBeliefs], part: float = PART) -> int | None:
    """The first round in which the runs' leading camps differ, or a camp's share differs by more
    than ``part`` between two runs; None when they never part (or there are fewer than two)."""
    if len(runs) < 2:
        return None
    for rnd in sorted({r for run in runs for r in run.rounds}):
        splits = [run.rounds[rnd] for run in runs if rnd in run.rounds]
        if len(splits) < 2:
            continue
        if len({camp_of(s) for s in splits}) > 1:
            return rnd
        shares = [s.shares() for s in splits]
        if any(max(x[c] for x in shares) - min(x[c] for x in shares) > part + 1e-9 for c in LABELS):
            return rnd
    return None


@dataclass
class Spread:
    """What the runs say together (see the module docstring)."""
    total: int                              # runs in the ensemble
    runs: list[RunBeliefs]                  # the runs with classified beliefs
    bands: list[Band]
    ends: dict[int, str]                    # run number -> the camp it ends in
    settled: dict[int, int | None]          # run number -> the round from which it held that camp
    parting: int | None
    majority: str | None                    # the camp more than half the runs end in
    representative: int                     # the median-most run
    shifts: list[tuple[int, float, float]] = field(default_factory=list)  # (agent, majority, outliers) means

    @property
    def counts(self) -> Counter:
        return Counter(self.ends.values())

    @property
    def agreeing(self) -> list[int]:
        return [k for k, camp in self.ends.items() if camp == self.majority]

    @property
    def outliers(self) -> list[int]:
        return [k for k, camp in self.ends.items() if camp != self.majority] if self.majority else []

    @property
    def untracked(self) -> int:
        return self.total - len(self.runs)

    def ends_line(self) -> str:
        """'3 runs end against, 1 for, 1 neutral or undecided', in the current language."""
        counts = self.counts.most_common()
        if not counts:
            return _("no run had its beliefs classified")
        (camp, n), rest = counts[0], counts[1:]
        others = "".join(", " + number(k) + " " + camp_word(c) for c, k in rest)
        return plural(n, "{n} run ends {camp}", "{n} runs end {camp}", camp=camp_word(camp)) + others

    def confidence_line(self) -> str:
        """The explicit confidence line (module docstring), in the current language; a prompt's
        English copy is this under English (engine.i18n.english)."""
        n = len(self.runs)
        if not n:
            return plural(self.total, "No confidence line: beliefs were not tracked in any of the {n} run.",
                          "No confidence line: beliefs were not tracked in any of the {n} runs.")
        if self.total == 1:   # a single run (a side of a comparison): no spread to speak of
            run = self.runs[0]
            camp = self.ends[run.run_no]
            share = run.rounds[run.last].shares()[camp]
            return _("One run: {who} {camp} by round {round} ({share} of agents); one run is one draw, not a spread.",
                     who=_("most agents") if share > 0.5 else _("the largest camp"), camp=camp_word(camp),
                     round=self.settled[run.run_no], share=percent(share))
        weak = (" " + plural(n, "With only {n} run, this is a weak signal.",
                             "With only {n} runs, this is a weak signal.") if n < FEW_RUNS else "")
        untracked = (" (" + plural(self.untracked, "{n} run without classified beliefs left out.",
                                   "{n} runs without classified beliefs left out.") + ")"
                     if self.untracked else "")
        if self.majority is None:
            return (_("No outcome in most runs: {ends}; the forecast is uncertain.", ends=self.ends_line())
                    + weak + untracked)
        agreeing = self.agreeing
        by = max((self.settled[k] or 0) for k in agreeing)
        finals = [r.rounds[r.last].shares()[self.majority] for r in self.runs if r.run_no in agreeing]
        who = _("most agents") if min(finals) > 0.5 else _("the largest camp")
        head = (plural(n, "All {n} run", "All {n} runs") if len(agreeing) == n
                else _("{agreeing} of {n} runs", agreeing=number(len(agreeing)), n=number(n)))
        lowest, highest = percent(min(finals)), percent(max(finals))
        span = lowest if lowest == highest else lowest.rstrip("%\u00a0 ") + "–" + highest
        rest = ""
        if self.outliers:
            others = Counter(self.ends[k] for k in self.outliers)
            rest = "; " + ", ".join(plural(c, "{n} run ended {camp}", "{n} runs ended {camp}", camp=camp_word(camp))
                                    for camp, c in others.most_common())
        return _("{head}: {who} {camp} by round {round} ({camp}: {span} of agents in those runs){rest}.",
                 head=head, who=who, camp=camp_word(self.majority), round=by, span=span, rest=rest) + weak + untracked


def representative(runs: list[RunBeliefs]) -> int | None:
    """The median-most run: final mean score nearest the runs' median (the lower number on a tie)."""
    finals = {r.run_no: r.rounds[r.last].mean for r in runs if r.rounds}
    if not finals:
        return None
    middle = statistics.median(finals.values())
    return min(finals, key=lambda k: (abs(finals[k] - middle), k))


def agent_shifts(runs: list[RunBeliefs], majority: list[int], outliers: list[int],
                 top: int = 5) -> list[tuple[int, float, float]]:
    """The agents whose mean final score differs most between the majority runs and the outliers."""
    def mean_of(numbers: list[int]) -> dict[int, float]:
        values: dict[int, list[float]] = {}
        for r in runs:
            if r.run_no in numbers:
                for agent, score in r.finals.items():
                    values.setdefault(agent, []).append(score)
        return {a: sum(v) / len(v) for a, v in values.items()}

    if not majority or not outliers:
        return []
    a, b = mean_of(majority), mean_of(outliers)
    common = sorted(set(a) & set(b), key=lambda agent: (-abs(a[agent] - b[agent]), agent))
    return [(agent, round(a[agent], 2), round(b[agent], 2)) for agent in common[:top]
            if abs(a[agent] - b[agent]) > 0.05]


def spread(total: int, runs: list[RunBeliefs]) -> Spread:
    """The spread of ``total`` runs, of which ``runs`` have classified beliefs."""
    tracked = [r for r in runs if r.rounds]
    ends = {r.run_no: camp_of(r.rounds[r.last]) for r in tracked}
    counts = Counter(ends.values())
    majority = next((c for c, n in counts.most_common(1) if n * 2 > len(tracked)), None)
    result = Spread(total, tracked, bands(tracked), ends, {r.run_no: settled_round(r) for r in tracked},
                    parting_round(tracked), majority,
                    representative(tracked) or min((r.run_no for r in runs), default=1))
    result.shifts = agent_shifts(tracked, result.agreeing, result.outliers)
    return result
