"""The report's belief pictures: the split per round and platform (PNG, stacked areas) and the
belief replay (animated GIF, one frame per round), drawn from ``sim_stances`` rows.

The replay shows every agent of each platform as a dot on a grid, coloured by its latest score
up to that round (red against, grey neutral, green for; a ring: not classified yet), with the
round's split in the title. It is about 600 px wide and a few hundred KiB, under what Discord
and Telegram preview (checked against ``MAX_GIF_BYTES``: past it, frames are dropped evenly and
the title says so). Blocking: call through ``run_cpu``.
"""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.colors import LinearSegmentedColormap  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

from engine.i18n import _  # noqa: E402
from engine.sim.inject.logged import InjectedEvent  # noqa: E402
from engine.sim.report.charts import (  # noqa: E402
    LABEL_SIZE,
    TICK_SIZE,
    TITLE_SIZE,
    TITLES,
    _empty,
    _legend_below,
    _style,
    mark_injected,
)
from engine.sim.run.output import PLATFORMS  # noqa: E402
from engine.sim.stance.tracking import RoundSplit, stance_name  # noqa: E402

CAMPS = (("for", "#2ca02c"), ("neutral", "#9e9e9e"), ("against", "#d62728"))
STANCE_CMAP = LinearSegmentedColormap.from_list("stance", ["#d62728", "#bdbdbd", "#2ca02c"])
GIF_NAME = "belief_replay.gif"
GIF_WIDTH_PX = 600
FRAME_MS = 700
MAX_GIF_BYTES = 2 * 1024 * 1024
Scores = list[tuple[str, int, int, float]]   # (platform, round, agent_id, score)


def belief_figure(splits: list[RoundSplit], injected: Sequence[InjectedEvent] = ()) -> Figure:
    """Agents for / neutral / against per round, one panel per platform, stacked areas; the
    rounds of ``injected`` events marked as on the activity chart."""
    platforms = sorted({s.platform for s in splits}, key=_platform_order)
    fig = Figure(figsize=(7, 2.6 * max(1, len(platforms)) + 1.2))
    if not platforms:
        ax = fig.add_subplot()
        _empty(ax, _("no beliefs were tracked"))
        _style(ax, TITLES["beliefs"])
        return fig
    axes = fig.subplots(len(platforms), 1, sharex=True, squeeze=False)[:, 0]
    for ax, platform in zip(axes, platforms):
        rows = [s for s in splits if s.platform == platform]
        xs = [s.round for s in rows]
        ys = [[s.for_ for s in rows], [s.neutral for s in rows], [s.against for s in rows]]
        if len(xs) == 1:   # one round: bars, an area needs two points
            bottom = 0
            for (camp, colour), y in zip(CAMPS, ys):
                ax.bar(xs, y, bottom=bottom, color=colour, width=0.5, label=stance_name(camp))
                bottom += y[0]
        else:
            ax.stackplot(xs, ys, colors=[c for _camp, c in CAMPS], labels=[stance_name(c) for c, _colour in CAMPS],
                         alpha=0.9)
        ax.set_title(platform, fontsize=LABEL_SIZE, loc="left")
        ax.set_ylabel(_("agents"), fontsize=LABEL_SIZE)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(min(xs) - (0.5 if len(xs) == 1 else 0), max(xs) + (0.5 if len(xs) == 1 else 0))
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=TICK_SIZE)
        ax.grid(alpha=0.3)
        marks = mark_injected(ax, [e for e in injected if platform in e.posts])
    axes[-1].set_xlabel(_("round"), fontsize=LABEL_SIZE)
    fig.suptitle(_(TITLES["beliefs"]), fontsize=TITLE_SIZE)
    handles = [Patch(color=colour, label=stance_name(camp)) for camp, colour in CAMPS]
    _legend_below(axes[-1], handles + marks[:4], ncol=3 if not marks else 1, gap=0.35)
    return fig


def _platform_order(platform: str) -> tuple[int, str]:
    return (PLATFORMS.index(platform) if platform in PLATFORMS else len(PLATFORMS), platform)


def _frames_to_show(rounds: list[int], limit: int) -> list[int]:
    if len(rounds) <= limit:
        return rounds
    step = len(rounds) / limit
    return sorted({rounds[min(len(rounds) - 1, math.floor(i * step))] for i in range(limit)} | {rounds[-1]})


def _frame(roster: dict[str, list[tuple[int, str]]], latest: dict[tuple[str, int], float],
           splits: dict[tuple[str, int], RoundSplit], round_no: int, last_round: int, note: str) -> Image.Image:
    platforms = list(roster)
    fig = Figure(figsize=(6, 3.6), dpi=GIF_WIDTH_PX / 6)
    axes = fig.subplots(1, len(platforms), squeeze=False)[0]
    for ax, platform in zip(axes, platforms):
        agents = roster[platform]
        cols = max(1, math.ceil(math.sqrt(len(agents) * 1.3)))
        xs = [i % cols for i in range(len(agents))]
        ys = [-(i // cols) for i in range(len(agents))]
        known = [(x, y, latest[(platform, a)]) for (a, _), x, y in zip(agents, xs, ys) if (platform, a) in latest]
        unknown = [(x, y) for (a, _), x, y in zip(agents, xs, ys) if (platform, a) not in latest]
        size = max(30, 900 / max(1, cols) ** 1.3)
        if known:
            ax.scatter([k[0] for k in known], [k[1] for k in known], c=[k[2] for k in known], cmap=STANCE_CMAP,
                       vmin=-1, vmax=1, s=size, edgecolors="#333333", linewidths=0.5)
        if unknown:
            ax.scatter([u[0] for u in unknown], [u[1] for u in unknown], s=size, facecolors="none",
                       edgecolors="#9e9e9e", linewidths=1.0)
        if len(agents) <= 30:
            for (_agent, name), x, y in zip(agents, xs, ys):
                ax.annotate(f"@{name}"[:10], (x, y), xytext=(0, -9), textcoords="offset points", ha="center",
                            va="top", fontsize=6, color="#444444")
        split = splits.get((platform, round_no))
        ax.set_title(_("{platform}, round {n}: ", platform=platform, n=round_no)
                     + (split.describe() if split else _("not classified")),
                     fontsize=8)
        ax.set_xlim(-0.7, cols - 0.3)
        ax.set_ylim(min(ys, default=0) - 0.8, 0.5)
        ax.set_axis_off()
    fig.subplots_adjust(left=0.02, right=0.98, top=0.8, bottom=0.14, wspace=0.08)
    fig.suptitle(_("Beliefs after round {round} of {last}", round=round_no, last=last_round) + note, fontsize=11)
    handles = [Line2D([], [], linestyle="", marker="o", markersize=7, color=c, label=stance_name(camp))
               for camp, c in CAMPS]
    handles.append(Line2D([], [], linestyle="", marker="o", markersize=7, markerfacecolor="none",
                          markeredgecolor="#9e9e9e", label=_("not classified yet")))
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def belief_replay(roster: dict[str, list[tuple[int, str]]], scores: Scores, splits: list[RoundSplit],
                  path: Path, max_frames: int = 120) -> Path | None:
    """Write the animated replay to ``path`` (one frame per round with scores, up to
    ``max_frames``); ``roster``: platform -> [(agent_id, username)]. None when nothing was scored."""
    rounds = sorted({r for _, r, _, _ in scores})
    roster = {p: roster[p] for p in sorted(roster, key=_platform_order) if any(s[0] == p for s in scores)}
    if not rounds or not roster:
        return None
    by_round: dict[int, list[tuple[str, int, float]]] = {}
    for platform, rnd, agent, score in scores:
        by_round.setdefault(rnd, []).append((platform, agent, score))
    split_at = {(s.platform, s.round): s for s in splits}
    limit = max_frames
    while True:
        shown = _frames_to_show(rounds, limit)
        note = "" if len(shown) == len(rounds) else _(" ({shown} of {rounds} rounds shown)", shown=len(shown),
                                                        rounds=len(rounds))
        latest: dict[tuple[str, int], float] = {}
        frames = []
        for rnd in rounds:
            latest.update({(p, a): s for p, a, s in by_round.get(rnd, [])})
            if rnd in shown:
                frames.append(_frame(roster, latest, split_at, rnd, rounds[-1], note))
        palette = [f.quantize(colors=64, method=Image.Quantize.MEDIANCUT) for f in frames]
        palette[0].save(path, save_all=True, append_images=palette[1:], duration=FRAME_MS, loop=0, optimize=True,
                        disposal=1)
        if path.stat().st_size <= MAX_GIF_BYTES or limit <= 2:
            return path
        limit = max(2, int(limit * MAX_GIF_BYTES / path.stat().st_size * 0.9))


def draw_beliefs(splits: list[RoundSplit], scores: Scores, roster: dict[str, list[tuple[int, str]]],
                 charts_dir: Path, injected: Sequence[InjectedEvent] = ()) -> dict[str, Path]:
    """The PNG split chart and the GIF replay in ``charts_dir``: name -> path (the GIF only when
    some agent was scored)."""
    charts_dir.mkdir(parents=True, exist_ok=True)
    png = charts_dir / "beliefs.png"
    belief_figure(splits, injected).savefig(png, dpi=110, bbox_inches="tight")
    out = {"beliefs": png}
    if (gif := belief_replay(roster, scores, splits, charts_dir / GIF_NAME)) is not None:
        out["belief_replay"] = gif
    return out
