"""Comparing ensembles: an ensemble against an ensemble, or against one run.

When either side of ``/compare`` is an ensemble (engine.sim.ensemble), the two-run comparison
(runs, charts, narrative) is made of each side's median-most run (a single run stands for itself),
and this part says what the sides say as wholes: each side's confidence line, how many of its
runs end for / against / neutral, its final split as the median with the range over its runs,
and whether the sides differ by more than their own spread. A side of one run is an ensemble of
one: its range is its value. Two sides differ beyond their spread in a camp when neither side's
median falls within the other side's range in the last round both reached; otherwise the
difference is within what the runs of one side already disagree on, and it is said so.

``overlay``: one chart, a panel per camp, each side's median line over its band (A solid, B
dashed). Blocking: call through ``run_cpu``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, PercentFormatter

from engine.i18n import DEFAULT, _, using
from engine.sim.compare.charts import STANCE_COLOURS, STYLE, TITLES
from engine.sim.ensemble.spread import Band, Spread, camp_word, run_beliefs, spread
from engine.sim.report.charts import _legend_below, _save, _style
from engine.sim.stance.tracking import LABELS, agent_scores, split_by_round, stance_name
from engine.words import joined, plural

CHART = "ensembles"


@dataclass
class Side:
    letter: str
    sim_id: str
    spread: Spread
    run_shown: int | None     # the run the two-run comparison uses (None: the side is one run)

    @property
    def label(self) -> str:
        what = (_("ensemble of {runs}", runs=plural(self.spread.total, "{n} run", "{n} runs"))
                if self.run_shown is not None else _("one run"))
        return f"{self.letter} `{self.sim_id}` ({what})"


async def side(db, letter: str, sim_id: str, ensemble=None) -> Side:
    """Side ``letter``: the ensemble (engine.sim.ensemble.report) or the single run ``sim_id``."""
    if ensemble is not None:
        return Side(letter, sim_id, ensemble.spread, ensemble.representative.run_no)
    one = run_beliefs(1, sim_id, await split_by_round(db, sim_id), await agent_scores(db, sim_id))
    return Side(letter, sim_id, spread(1, [one]), None)


def _last_common(a: Spread, b: Spread) -> tuple[Band, Band] | None:
    rounds = {x.round for x in a.bands} & {x.round for x in b.bands}
    if not rounds:
        return None
    last = max(rounds)
    return next(x for x in a.bands if x.round == last), next(x for x in b.bands if x.round == last)


def beyond_spread(a: Spread, b: Spread) -> list[str]:
    """The camps in which the sides differ beyond their own spread, in the last round both reached."""
    pair = _last_common(a, b)
    if pair is None:
        return []
    x, y = pair
    return [c for c in LABELS
            if not (x.low[c] <= y.median[c] <= x.high[c]) and not (y.low[c] <= x.median[c] <= y.high[c])]


def _final(side: Side) -> str:
    """A side's split in its last round (the median and, over several runs, the range), in the current language."""
    if not side.spread.bands:
        return _("beliefs not tracked")
    b = side.spread.bands[-1]
    if side.spread.total == 1 or b.runs == 1:
        camps = ", ".join(stance_name(c) + f" {b.median[c]:.0%}" for c in LABELS)
    else:
        camps = ", ".join(stance_name(c) + f" {b.median[c]:.0%} ({b.low[c]:.0%}–{b.high[c]:.0%})" for c in LABELS)
    return _("round {round}: {camps}", round=b.round, camps=camps)


def verdict(a: Side, b: Side) -> str:
    pair = _last_common(a.spread, b.spread)
    if pair is None:
        return _("Beliefs were not tracked on both sides: their outcomes cannot be compared.")
    camps = beyond_spread(a.spread, b.spread)
    if camps:
        return _("In round {round} the sides differ beyond their own spread in the share {camps}: neither side's "
                 "median lies within the other's range.", round=pair[0].round, camps=joined(map(camp_word, camps)))
    return _("In round {round} the difference between the sides is within their own spread: the runs of one side "
             "already disagree as much, so it may be chance.", round=pair[0].round)


def facts(a: Side, b: Side) -> dict:
    """What the narrative writer is told about the sides as wholes: English, as every prompt (the
    lines the chat reads, written by the same functions under English)."""
    with using(DEFAULT):
        return {"sides": {s.letter: {"simulation": s.sim_id, "runs": s.spread.total,
                                     "confidence": s.spread.confidence_line(),
                                     "ends": dict(s.spread.counts), "final_split": _final(s),
                                     "run_compared": s.run_shown} for s in (a, b)},
                "difference": verdict(a, b)}


def markdown(a: Side, b: Side) -> list[str]:
    lines = ["## " + _("The sides as wholes"), ""]
    for s in (a, b):
        shown = (" " + _("The run compared below is its median-most, run {run}.", run=s.run_shown)
                 if s.run_shown is not None else "")
        lines.append("- " + _("{side}: {confidence} Final split {split}.", side=s.label,
                              confidence=s.spread.confidence_line(), split=_final(s)) + shown)
    lines += ["", "**" + verdict(a, b) + "**", ""]
    return lines


def summary_lines(a: Side, b: Side) -> list[str]:
    return [f"{s.label}: {s.spread.confidence_line()}" for s in (a, b)] + [verdict(a, b)]


def overlay(a: Side, b: Side) -> Figure:
    fig = Figure(figsize=(7.5, 8.2))
    axes = fig.subplots(3, 1, sharex=True)
    for ax, camp in zip(axes, LABELS):
        colour = STANCE_COLOURS[camp]
        for side in (a, b):
            bands = side.spread.bands
            if not bands:
                continue
            xs = [x.round for x in bands]
            ax.fill_between(xs, [x.low[camp] for x in bands], [x.high[camp] for x in bands], color=colour,
                            alpha=0.15 if side.letter == "A" else 0.08, linewidth=0,
                            hatch=None if side.letter == "A" else "//")
            ax.plot(xs, [x.median[camp] for x in bands], color=colour, linewidth=2, **STYLE[side.letter])
        ax.set_ylim(0, 1)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        _style(ax, f"{camp}", "", "share of agents", loc="left")
    axes[-1].set_xlabel("round")
    fig.suptitle(TITLES[CHART], fontsize=14)
    handles: list[Artist] = [Line2D([], [], color="#333333", linewidth=2, **STYLE[s.letter], label=s.label)
                             for s in (a, b)]
    handles.append(Patch(color="#9e9e9e", alpha=0.3, label="range over a side's runs"))
    _legend_below(axes[-1], handles, ncol=1, gap=0.3)
    return fig


def draw(out_dir: Path, a: Side, b: Side) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    return _save(overlay(a, b), out_dir / f"{CHART}.png")
