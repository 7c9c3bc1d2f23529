"""The charts of an ensemble, with bands: what the runs agree on and how far apart they are.

- ``ensemble_beliefs``: each camp's share of the agents per round, the median over the runs as a
  line and the range from the lowest to the highest run as a band, the round where the runs part
  marked;
- ``ensemble_runs``: every run's mean stance score per round as a thin line coloured by the camp
  it ends in (numbered at its end), the median bold over the band of all runs;
- ``ensemble_activity``: actions per round, median line and range band.

Their captions are in ``engine.sim.report.charts.TITLES``. Drawn with matplotlib's object API in
the report charts' style (readable at chat size, rounds
from 1, legends below the axes). Blocking: call through ``run_cpu``.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, PercentFormatter

from engine.sim.ensemble.spread import Band, RunBeliefs, Spread
from engine.sim.report.belief_charts import CAMPS
from engine.sim.report.charts import LABEL_SIZE, TICK_SIZE, _empty, _legend_below, _save, _style

COLOUR = dict(CAMPS)
PART_COLOUR = "#444444"


def _mark_parting(ax, parting: int | None) -> list[Line2D]:
    if parting is None:
        return []
    ax.axvline(parting, color=PART_COLOUR, linestyle=":", linewidth=1.4)
    return [Line2D([], [], color=PART_COLOUR, linestyle=":", label=f"runs part at round {parting}")]


def beliefs_figure(bands: list[Band], total: int, parting: int | None) -> Figure:
    fig = Figure(figsize=(7, 4.6))
    ax = fig.add_subplot()
    _style(ax, f"Beliefs per round over {total} runs", "round", "share of agents")
    if not bands:
        _empty(ax, "no beliefs were tracked")
        return fig
    xs = [b.round for b in bands]
    for camp, colour in CAMPS:
        ax.fill_between(xs, [b.low[camp] for b in bands], [b.high[camp] for b in bands], color=colour, alpha=0.18,
                        linewidth=0)
        ax.plot(xs, [b.median[camp] for b in bands], color=colour, linewidth=2.4, marker="o", markersize=4)
    ax.set_ylim(0, 1)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    handles: list[Artist] = [Line2D([], [], color=c, linewidth=2.4, label=f"{camp}: median") for camp, c in CAMPS]
    handles.append(Patch(color="#9e9e9e", alpha=0.3, label="range over the runs"))
    _legend_below(ax, handles + _mark_parting(ax, parting), ncol=3, gap=0.18)
    return fig


def runs_figure(runs: list[RunBeliefs], ends: dict[int, str], bands: list[Band], parting: int | None) -> Figure:
    fig = Figure(figsize=(7, 4.6))
    ax = fig.add_subplot()
    _style(ax, f"Mean stance per round, {len(runs)} runs", "round", "mean score (-1 against, +1 for)")
    if not runs:
        _empty(ax, "no beliefs were tracked")
        return fig
    xs = [b.round for b in bands]
    ax.fill_between(xs, [b.mean[1] for b in bands], [b.mean[2] for b in bands], color="#9e9e9e", alpha=0.2,
                    linewidth=0)
    ends_at: dict[tuple[int, float], list[int]] = {}   # runs ending at one point share one label
    for run in runs:
        rounds = sorted(run.rounds)
        ys = [run.rounds[r].mean for r in rounds]
        colour = COLOUR[ends.get(run.run_no, "neutral")]
        ax.plot(rounds, ys, color=colour, linewidth=1.1, alpha=0.85)
        ends_at.setdefault((rounds[-1], round(ys[-1], 2)), []).append(run.run_no)
    for (x, y), numbers in ends_at.items():
        colour = COLOUR[ends.get(numbers[0], "neutral")]
        label = f"run {numbers[0]}" if len(numbers) == 1 else "runs " + ", ".join(map(str, numbers))
        ax.annotate(label, (x, y), xytext=(4, 0), textcoords="offset points", fontsize=9, color=colour,
                    va="center")
    ax.plot(xs, [b.mean[0] for b in bands], color="#222222", linewidth=2.6)
    ax.axhline(0, color="#bbbbbb", linewidth=0.8)
    ax.set_ylim(-1.05, 1.05)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    handles = [Line2D([], [], color="#222222", linewidth=2.6, label="median of the runs"),
               Patch(color="#9e9e9e", alpha=0.3, label="range")]
    handles += [Line2D([], [], color=c, linewidth=1.1, label=f"a run that ends {camp}") for camp, c in CAMPS
                if camp in ends.values()]
    _legend_below(ax, handles + _mark_parting(ax, parting), ncol=2, gap=0.18)
    return fig


def activity_figure(activity: dict[int, dict[int, int]]) -> Figure:
    """``activity``: run number -> round (from 1) -> actions on all platforms."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    _style(ax, f"Actions per round over {len(activity)} runs", "round", "actions")
    rounds = sorted({r for per in activity.values() for r in per})
    if not rounds:
        _empty(ax, "no actions were logged")
        return fig
    values = [[per.get(r, 0) for per in activity.values()] for r in rounds]
    ax.fill_between(rounds, [min(v) for v in values], [max(v) for v in values], color="#1d9bf0", alpha=0.2,
                    linewidth=0)
    ax.plot(rounds, [statistics.median(v) for v in values], color="#1d9bf0", linewidth=2.4, marker="o",
            markersize=4)
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=TICK_SIZE)
    ax.grid(alpha=0.3)
    _legend_below(ax, [Line2D([], [], color="#1d9bf0", linewidth=2.4, label="median of the runs"),
                       Patch(color="#1d9bf0", alpha=0.3, label="range over the runs")], ncol=2, gap=0.18)
    ax.set_ylabel("actions", fontsize=LABEL_SIZE)
    return fig


def draw_ensemble_charts(spread: Spread, activity: dict[int, dict[int, int]], charts_dir: Path) -> dict[str, Path]:
    """The ensemble's charts in ``charts_dir``: name -> path (the belief charts only when some run
    had its beliefs classified)."""
    charts_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    if spread.runs:
        out["ensemble_beliefs"] = _save(beliefs_figure(spread.bands, spread.total, spread.parting),
                                        charts_dir / "ensemble_beliefs.png")
        out["ensemble_runs"] = _save(runs_figure(spread.runs, spread.ends, spread.bands, spread.parting),
                                     charts_dir / "ensemble_runs.png")
    out["ensemble_activity"] = _save(activity_figure(activity), charts_dir / "ensemble_activity.png")
    return out
