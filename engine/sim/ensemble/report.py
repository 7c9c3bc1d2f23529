"""An ensemble as the report, ``/sim status``, ``/compare``, report chat and exports read it.

``load`` reads the runs of an ensemble (their rows, their stances from ``sim_stances``, their
activity and posts from their folders) into an ``Ensemble``: the ``Spread`` of their beliefs
(engine.sim.ensemble.spread), the representative (median-most) run, and what the majority and the
outliers did. From it come:

- ``section``: the report's "Across the N runs" section (Markdown, in the current language: the
  report's): the confidence line, how many
  runs end for / against / neutral, the round where they part, the split per round as the median
  with the range, and the majority and the outliers (actions, their most engaged posts cited as
  ``[run 3 twitter post 12]``, the agents whose final stance differs most between them);
- ``tool_result``: the report agent's ``ensemble_runs`` tool (engine.sim.report.tools): every run
  at a glance, or one run's split per round and posts, each post with its citation; English, as
  every prompt (the confidence line's English copy: engine.i18n.english).
"""
from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from engine.db import Database
from engine.i18n import _, english, number
from engine.offload import run_cpu
from engine.sim.ensemble.spread import Spread, camp_word, run_beliefs, spread
from engine.sim.records import SimRecord, members
from engine.sim.report.stats import PostStat, SimStats, compute_stats
from engine.sim.run.output import platforms_of
from engine.sim.stance.tracking import LABELS, agent_scores, split_by_round, stance_name
from engine.words import plural

TOP = 3


def cite(run_no: int, post: PostStat) -> str:
    """A post of one run of an ensemble: ``[run 3 twitter post 12]``."""
    return f"[run {run_no} {post.platform} post {post.post_id}]"


def _activity(stats: SimStats) -> dict[int, int]:
    """Round (from 1) -> actions on every platform."""
    out: dict[int, int] = {}
    for per in stats.rounds.values():
        for rnd, n in per.items():
            out[rnd + 1] = out.get(rnd + 1, 0) + n
    return out


def _stats(folder: Path) -> SimStats | None:
    return compute_stats(folder) if platforms_of(folder) else None


@dataclass
class Ensemble:
    head: SimRecord
    runs: list[SimRecord]                          # every registered run, in order
    spread: Spread
    stats: dict[int, SimStats] = field(default_factory=dict)    # run number -> its statistics (runs that ran)
    names: dict[int, str] = field(default_factory=dict)         # agent id -> username

    @property
    def size(self) -> int:
        return len(self.runs)

    def run(self, k: int) -> SimRecord | None:
        return next((r for r in self.runs if r.run == k), None)

    @property
    def representative(self) -> SimRecord:
        """The median-most run (run 1 when no run has classified beliefs)."""
        return self.run(self.spread.representative) or self.runs[0]

    def activity(self) -> dict[int, dict[int, int]]:
        return {k: _activity(s) for k, s in self.stats.items()}

    def actions(self, k: int) -> int:
        stats = self.stats.get(k)
        return stats.total_actions if stats is not None else 0

    def top_posts(self, k: int, top: int = TOP) -> list[PostStat]:
        stats = self.stats.get(k)
        return stats.posts[:top] if stats is not None else []

    def _runs_text(self, numbers: list[int]) -> str:
        if len(numbers) == 1:
            return _("run {run}", run=numbers[0])
        return _("runs {runs}", runs=", ".join(map(str, numbers)))

    def _name(self, agent: int) -> str:
        return f"@{self.names.get(agent, f'agent{agent}')}"

    # -- the report's section -------------------------------------------------------------------

    def section(self) -> str:
        """The report's "Across the N runs" section, in the current language (the report's)."""
        s = self.spread
        lines = ["**" + s.confidence_line() + "**", ""]
        lines.append("- " + _("Runs: {n}, the same agents and documents, each with its own seed (who acts when, what "
                              "the feeds show, the model's sampling); {ends}.",
                              n=number(self.size), ends=s.ends_line()))
        if s.runs:
            lines.append("- " + (_("The runs part at round {round}: from there their leading camps differ, or a "
                                   "camp's share differs by more than a quarter of the agents between two runs.",
                                   round=s.parting)
                                 if s.parting is not None else _("The runs never part: round by round they lead with "
                                                                 "the same camp, within a quarter of the agents of "
                                                                 "each other.")))
        rep = self.representative
        lines.append("- " + _("The median-most run is run {run} (`{id}`): its final mean stance is nearest the median "
                              "of the runs'. The sections below read its posts and agents; the ensemble_runs tool "
                              "read the others.", run=rep.run_no, id=rep.id))
        if s.bands:
            header = [_("round"), _("runs"), *map(stance_name, LABELS), _("mean score")]
            lines += ["", "| " + " | ".join(header) + " |", "|---|---|---|---|---|---|"]
            for b in s.bands:
                cells = " | ".join(f"{b.median[c]:.0%} ({b.low[c]:.0%}–{b.high[c]:.0%})" for c in LABELS)
                mean = f"{b.mean[0]:+.2f} ({b.mean[1]:+.2f}–{b.mean[2]:+.2f})"
                lines.append(f"| {b.round} | {b.runs} | {cells} | {mean} |")
            lines += ["", _("Each camp's share of the agents classified in the round: the median over the runs, "
                            "and in brackets the lowest and the highest run."), ""]
        lines += self._majority_and_outliers()
        return "\n".join(lines)

    def _majority_and_outliers(self) -> list[str]:
        s = self.spread
        if s.majority is None or not s.outliers:
            if not s.runs:
                return []
            return ["- " + (_("Every run ends in the same camp: there are no outliers.") if s.majority else
                            _("No camp has a majority of the runs: there is no majority to set outliers against."))]
        agreeing, outliers = s.agreeing, s.outliers
        median = statistics.median(self.actions(k) for k in agreeing)
        lines = ["- " + _("The majority ({runs}) ends {camp}, with a median of {actions} per run.",
                          runs=self._runs_text(agreeing), camp=camp_word(s.majority),
                          actions=plural(round(median), "{n} action", "{n} actions"))]
        for k in outliers:
            line = "- " + _("Outlier run {run} ends {camp} (held from round {round}), with {actions}.",
                            run=k, camp=camp_word(s.ends[k]), round=s.settled[k],
                            actions=plural(self.actions(k), "{n} action", "{n} actions"))
            if posts := self.top_posts(k, 1):
                p = posts[0]
                line += " " + _("Its most engaged post: {cite} @{author}: \"{text}\"", cite=cite(k, p),
                                author=p.author, text=_short(p.content))
            lines.append(line)
        if s.shifts:
            lines.append("- " + _("Agents whose final stance differs most: {agents}.", agents="; ".join(
                _("{agent} {majority} in the majority, {outliers} in the outliers", agent=self._name(a),
                  majority=f"{m:+.2f}", outliers=f"{o:+.2f}") for a, m, o in s.shifts)))
        return lines

    # -- the report agent's tool ---------------------------------------------------------------

    def tool_result(self, run: int, top: int, on_cite: Callable[[str, str, str], None]) -> dict:
        """``ensemble_runs``: every run (``run`` 0) or one run, with cited posts; ``on_cite(cite,
        author, content)`` records each citation handed out."""
        s = self.spread

        def posts(k: int) -> list[dict]:
            out = []
            for p in self.top_posts(k, top):
                on_cite(cite(k, p), p.author, p.content)
                out.append({"cite": cite(k, p), "author": f"@{p.author}", "round": (p.round or 0) + 1,
                            "engagement": p.engagement, "content": _short(p.content, 300)})
            return out

        if run:
            member = self.run(run)
            if member is None:
                return {"error": f"no run {run}: the runs are 1 to {self.size}"}
            mine = next((r for r in s.runs if r.run_no == run), None)
            return {"run": run, "simulation": member.id, "ends": s.ends.get(run, "not classified"),
                    "held_from_round": s.settled.get(run), "actions": self.actions(run),
                    "split_per_round": {str(rnd): vars(split) for rnd, split in sorted(mine.rounds.items())}
                    if mine else "not tracked", "top_posts": posts(run)}
        return {"runs": self.size, "confidence": english(s.confidence_line), "ends": dict(s.counts),
                "parting_round": s.parting, "median_most_run": self.representative.run,
                "per_run": [{"run": r.run, "ends": s.ends.get(r.run, "not classified"),
                             "held_from_round": s.settled.get(r.run), "actions": self.actions(r.run),
                             "top_posts": posts(r.run)} for r in self.runs],
                "agents_differing_most": [{"agent": self._name(a), "majority": m, "outliers": o}
                                          for a, m, o in s.shifts]}


def _short(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def load(db: Database, head: SimRecord, with_stats: bool = True) -> Ensemble | None:
    """The ensemble ``head`` (None when it has no registered runs: one run, or not at step 4 yet);
    ``with_stats``: read each run's statistics from its folder too (the report, the tool)."""
    runs = await members(db, head.id)
    if not runs:
        return None
    beliefs = [run_beliefs(r.run, r.id, await split_by_round(db, r.id), await agent_scores(db, r.id))
               for r in runs]
    ens = Ensemble(head, runs, spread(len(runs), beliefs))
    if with_stats:
        found = await asyncio.gather(*(run_cpu(_stats, r.folder) for r in runs))
        ens.stats = {r.run: s for r, s in zip(runs, found) if s is not None}
        ens.names = {a.agent_id: a.name for s in ens.stats.values() for a in s.agents}
    return ens
