"""Charts that overlay two runs (A and B) of a comparison, in the report charts' style.

Activity: actions per round and platform, A solid with dots, B dashed with squares, the
platform's colour for both. Beliefs: one panel per platform, agents for / neutral / against per
round, A solid and B dashed. Rounds count from 1; the round the runs part is a dotted line,
an injected event a grey band labelled with its run's letter. The legend names each run as
"A `id`" / "B `id`" and sits below the axes, where it covers no data. Blocking: call through
``run_cpu``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from engine.i18n import N_, _
from engine.sim.report.charts import COLOURS, TICK_SIZE, _empty, _legend_below, _save, _style
from engine.sim.stance.history import LABELS, Beliefs
from engine.sim.stance.tracking import stance_name

# A: solid line, filled dots; B: dashed line, hollow squares drawn larger, so equal values show both
STYLE: dict[str, dict[str, Any]] = {"A": {"linestyle": "-", "marker": "o", "markersize": 6},
         "B": {"linestyle": "--", "marker": "s", "markersize": 10, "markerfacecolor": "none", "markeredgewidth": 1.6}}
STANCE_COLOURS = {"for": "#2a9d8f", "neutral": "#8d99ae", "against": "#e63946"}
TITLES = {"activity": N_("Activity per round, both runs"), "beliefs": N_("Belief split per round, both runs"),
          "ensembles": N_("Beliefs per round, each side's median and range")}   # engine.sim.compare.ensembles


def run_label(letter: str, sim_id: str) -> str:
    return f"{letter} `{sim_id}`"


def _marks(ax, from_round: int, injected: dict[str, list[int]]) -> list[Line2D]:
    """The round the runs part and the injected events; returns their legend handles."""
    handles = []
    if from_round > 1:
        ax.axvline(from_round - 0.5, color="#444444", linestyle=":", linewidth=1.2)
        handles.append(Line2D([], [], color="#444444", linestyle=":",
                              label=_("runs part before round {round}", round=from_round)))
    if any(injected.values()):   # headroom, so the events' labels cover no data
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15 + 0.4)
    for letter, rounds in injected.items():
        for rnd in sorted(set(rounds)):
            ax.axvline(rnd, color="#bbbbbb", linewidth=6, alpha=0.4, zorder=0)
            ax.annotate(_("event {run}", run=letter), (rnd, 0.98), xycoords=("data", "axes fraction"), ha="center",
                        va="top",
                        fontsize=TICK_SIZE - 1, color="#555555", backgroundcolor="white")
    if any(injected.values()):
        handles.append(Line2D([], [], color="#bbbbbb", linewidth=6, alpha=0.6,
                              label=_("event injected (in run A or B)")))
    return handles


def activity_overlay(runs: dict[str, tuple[str, dict[str, dict[int, int]]]], from_round: int,
                     injected: dict[str, list[int]]) -> Figure:
    """``runs``: letter -> (sim id, platform -> round from 0 -> actions), as SimStats.rounds."""
    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.add_subplot()
    handles = []
    for letter, (sim_id, rounds) in runs.items():
        for platform, per_round in rounds.items():
            if not per_round:
                continue
            xs = list(range(min(per_round), max(per_round) + 1))
            ax.plot([x + 1 for x in xs], [per_round.get(x, 0) for x in xs], linewidth=2,
                    color=COLOURS.get(platform), **STYLE[letter])
            handles.append(Line2D([], [], color=COLOURS.get(platform), linewidth=2, **STYLE[letter],
                                  label=f"{run_label(letter, sim_id)} · {platform}"))
    if not handles:
        _empty(ax, _("no actions recorded in either run"))
        _style(ax, TITLES["activity"])
        return fig
    handles += _marks(ax, from_round, injected)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    _style(ax, TITLES["activity"], N_("round"), N_("actions"), loc="left")
    _legend_below(ax, handles, ncol=2, gap=0.18)
    return fig


def belief_overlay(runs: dict[str, tuple[str, Beliefs]], from_round: int, injected: dict[str, list[int]]) -> Figure:
    """``runs``: letter -> (sim id, its stances); one panel per platform with stances in either run."""
    platforms = sorted({p for _sim, beliefs in runs.values() for p in beliefs.platforms()},
                       key=lambda p: list(COLOURS).index(p) if p in COLOURS else 99)
    fig = Figure(figsize=(7.5, 3.6 * max(1, len(platforms)) + 0.8))
    if not platforms:
        ax = fig.add_subplot()
        _empty(ax, _("stances were not tracked in either run"))
        _style(ax, TITLES["beliefs"])
        return fig
    axes = fig.subplots(len(platforms), 1, sharex=True, squeeze=False)[:, 0]
    for ax, platform in zip(axes, platforms):
        for letter, (_sim, beliefs) in runs.items():
            rounds = beliefs.rounds(platform)
            splits = [beliefs.split(platform, r) for r in rounds]
            for label, attr in zip(LABELS, ("for_", "neutral", "against")):
                ax.plot(rounds, [getattr(s, attr) for s in splits], linewidth=2, color=STANCE_COLOURS[label],
                        **STYLE[letter])
        marks = _marks(ax, from_round, injected)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        _style(ax, _(TITLES["beliefs"]) + f" · {platform}", "", N_("agents"), loc="left")
    axes[-1].set_xlabel(_("round"), fontsize=TICK_SIZE + 2)
    handles = ([Line2D([], [], color=STANCE_COLOURS[label], linewidth=2, label=stance_name(label)) for label in LABELS]
               + [Line2D([], [], color="#333333", linewidth=2, **STYLE[letter], label=run_label(letter, sim_id))
                  for letter, (sim_id, _) in runs.items()] + marks)
    _legend_below(axes[-1], handles, ncol=3, gap=0.3)
    return fig


def draw_comparison_charts(out_dir: Path, activity: dict, beliefs: dict, from_round: int,
                           injected: dict[str, list[int]]) -> dict[str, Path]:
    """activity.png and beliefs.png under ``out_dir`` (created); name -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return {"activity": _save(activity_overlay(activity, from_round, injected), out_dir / "activity.png"),
            "beliefs": _save(belief_overlay(beliefs, from_round, injected), out_dir / "beliefs.png")}
