"""PNG charts of a run, drawn with matplotlib's object API (no pyplot global state), so
several reports can render at once in worker threads; call through ``run_cpu``.

Each chart explains itself at Discord's preview size: axis labels, integer ticks for counts,
rounds numbered from 1 as the chat numbers them, legends placed where they cover no data.
Charts over rounds mark the events injected into the run (``mark_injected``): a dashed line at
the round each went out in, and under the axes a legend of who posted what.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import networkx as nx  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from engine.sim.injected import InjectedEvent  # noqa: E402
from engine.sim.report.stats import SimStats  # noqa: E402
from engine.words import plural  # noqa: E402

CHARTS_DIR = Path("report") / "charts"
COLOURS = {"twitter": "#1d9bf0", "reddit": "#ff4500"}
TITLES = {
    "activity": "Activity over rounds",
    "action_mix": "Action mix",
    "top_agents": "Most active and engaged agents",
    "interactions": "Who interacted with whom",
    "beliefs": "Beliefs per round",                  # engine.sim.report.beliefs
    "belief_replay": "Belief replay, one frame per round",
}


# Discord shows a chart about 400-550 px wide in the channel: figures are about 7 in at 110 dpi
# (770 px), so text is set large enough to stay readable when shrunk by half.
TITLE_SIZE, LABEL_SIZE, TICK_SIZE = 15, 13, 11


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside the axes are kept
    return path


def _style(ax, title: str, xlabel: str = "", ylabel: str = "", loc: str = "center") -> None:
    ax.set_title(title, fontsize=TITLE_SIZE, loc=loc)
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)
    ax.tick_params(labelsize=TICK_SIZE)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey",
            fontsize=LABEL_SIZE)
    ax.set_xticks([])
    ax.set_yticks([])


def _legend_below(ax, handles=None, ncol: int = 2, title: str | None = None, gap: float = 0.16,
                  spacing: float = 0.5) -> None:
    """A legend ``gap`` (in axes heights) under the axes, where it can cover no data."""
    kwargs = {"handles": handles} if handles is not None else {}
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -gap), ncol=ncol, frameon=False, labelspacing=spacing,
              fontsize=TICK_SIZE, title=title, title_fontsize=TICK_SIZE, **kwargs)


def _legend_above(ax) -> None:
    """The platforms' legend above the axes, right of a left-aligned title: it covers no data."""
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False, fontsize=TICK_SIZE)


INJECTED_COLOUR = "#7a5195"


def mark_injected(ax, injected: list[InjectedEvent]) -> list[Line2D]:
    """A dashed vertical line at the round (from 1) of each injected event (events of one round
    share a line); returns legend handles that say which source posted what in that round."""
    by_round: dict[int, list] = {}
    for event in injected:
        by_round.setdefault(event.round + 1, []).append(event)
    handles = []
    for number, events in sorted(by_round.items()):
        ax.axvline(number, color=INJECTED_COLOUR, linestyle="--", linewidth=1.5, alpha=0.8, zorder=1)
        said = "; ".join(f"{e.source}: {e.text[:40] + '…' if len(e.text) > 40 else e.text}" for e in events[:2])
        more = f" (+{len(events) - 2} more)" if len(events) > 2 else ""
        handles.append(Line2D([], [], color=INJECTED_COLOUR, linestyle="--", linewidth=1.5,
                              label=f"round {number}: {said}{more}"))
    return handles


def activity_figure(stats: SimStats) -> Figure:
    """Actions per round and platform; rounds numbered from 1, as the chat counts them."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    drawn = False
    for platform, rounds in stats.rounds.items():
        if rounds:
            xs = list(range(min(rounds), max(rounds) + 1))
            ax.plot([x + 1 for x in xs], [rounds.get(x, 0) for x in xs], marker="o", linewidth=2,
                    label=platform, color=COLOURS.get(platform))
            drawn = True
    if drawn:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        injected = mark_injected(ax, stats.injected)
        _legend_above(ax)
        if injected:  # a second legend, under the axes: the platforms' one stays
            ax.add_artist(ax.get_legend())
            _legend_below(ax, injected[:6], ncol=1, title="injected events", gap=0.18)
        _style(ax, TITLES["activity"], "round", "actions", loc="left")
    else:
        _empty(ax, "no actions recorded")
        _style(ax, TITLES["activity"])
    return fig


def action_mix_figure(stats: SimStats) -> Figure:
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    actions = sorted({a for m in stats.mix.values() for a in m},
                     key=lambda a: -sum(m.get(a, 0) for m in stats.mix.values()))
    if actions:
        width = 0.8 / max(1, len(stats.mix))
        for i, (platform, mix) in enumerate(stats.mix.items()):
            ax.bar([x + i * width for x in range(len(actions))], [mix.get(a, 0) for a in actions],
                   width, label=platform, color=COLOURS.get(platform))
        ax.set_xticks([x + width * (len(stats.mix) - 1) / 2 for x in range(len(actions))])
        ax.set_xticklabels([a.replace("_", " ") for a in actions], rotation=30, ha="right")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        _legend_above(ax)
        _style(ax, TITLES["action_mix"], "", "count", loc="left")
    else:
        _empty(ax, "no actions recorded")
        _style(ax, TITLES["action_mix"])
    return fig


def top_agents_figure(stats: SimStats, top: int = 10) -> Figure:
    agents = [a for a in stats.agents if a.actions or a.engagement][:top][::-1]
    fig = Figure(figsize=(7, 0.55 * max(4, len(agents)) + 1.6))
    ax = fig.add_subplot()
    if agents:
        ys = range(len(agents))
        ax.barh([y + 0.2 for y in ys], [a.actions for a in agents], 0.4, label="actions taken", color="#4c72b0")
        ax.barh([y - 0.2 for y in ys], [a.engagement for a in agents], 0.4, label="engagement received",
                color="#dd8452")
        ax.set_yticks(list(ys))
        ax.set_yticklabels([f"@{a.name}" for a in agents])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="x", alpha=0.3)
        _style(ax, TITLES["top_agents"], "count (actions taken; likes, comments and reposts received)")
        _legend_below(ax, ncol=2, gap=0.22)
    else:
        _empty(ax, "no agent acted")
        _style(ax, TITLES["top_agents"])
    return fig


def interaction_figure(stats: SimStats, max_nodes: int = 25) -> Figure:
    """Who liked, commented, reposted, quoted or followed whom during the run. The follow graph
    seeded at set-up is drawn faint (dashed, light), between the agents shown only; node size
    is interactions received, edge width interactions along that edge; both have a legend."""
    graph = nx.DiGraph()
    seeded = nx.DiGraph()
    for e in stats.interactions:
        target = graph if e.during_run else seeded
        w = target.get_edge_data(e.source, e.target, {}).get("weight", 0)
        target.add_edge(e.source, e.target, weight=w + e.count)
    if graph.number_of_nodes() > max_nodes:   # keep the busiest agents readable
        keep = sorted(graph.nodes, key=lambda n: -graph.degree(n, weight="weight"))[:max_nodes]
        graph = graph.subgraph(keep).copy()
    fig = Figure(figsize=(7, 7))
    ax = fig.add_subplot()
    if graph.number_of_edges():
        faint = seeded.subgraph(graph.nodes).copy()
        faint.remove_edges_from([e for e in faint.edges if graph.has_edge(*e)])
        count = graph.number_of_nodes()
        pos = nx.spring_layout(graph, seed=7, weight="weight", k=2.4 / count ** 0.5, iterations=100)
        received = dict(graph.in_degree(weight="weight"))
        top = max(received.values() or [1]) or 1
        heaviest = max(d["weight"] for _, _, d in graph.edges(data=True))
        # relative scales, smaller with more agents; the legend uses the same ones
        biggest = 1400 / max(1.0, (count / 6) ** 0.5)
        size = lambda n: 120 + biggest * n / top  # noqa: E731
        width = lambda n: 0.8 + 4.0 * n / heaviest  # noqa: E731
        if faint.number_of_edges():
            nx.draw_networkx_edges(faint, pos, ax=ax, arrows=False, edge_color="#c8c8c8", style="dashed",
                                   width=0.8)
        nx.draw_networkx_nodes(graph, pos, ax=ax, node_color="#8fb8de",
                               node_size=[size(received.get(n, 0)) for n in graph.nodes])
        nx.draw_networkx_edges(graph, pos, ax=ax, arrows=True, arrowsize=14, edge_color="#555555", alpha=0.8,
                               connectionstyle="arc3,rad=0.12",  # a→b and b→a stay apart
                               width=[width(d["weight"]) for _, _, d in graph.edges(data=True)],
                               node_size=[size(received.get(n, 0)) for n in graph.nodes])
        nx.draw_networkx_labels(graph, pos, ax=ax, labels={n: f"@{n}" for n in graph.nodes},
                                font_size=TICK_SIZE if count <= 15 else TICK_SIZE - 2)
        ax.margins(0.12)
        ax.set_axis_off()
        sizes = sorted({1, max(1, top // 2), top})
        widths = sorted({1, heaviest})
        handles = ([Line2D([], [], linestyle="", marker="o", markersize=(size(n) ** 0.5), color="#8fb8de",
                           label=f"{plural(n, 'interaction')} received") for n in sizes]
                   + [Line2D([], [], color="#555555", linewidth=width(n), label=plural(n, "interaction"))
                      for n in widths])
        if faint.number_of_edges():
            handles.append(Line2D([], [], color="#c8c8c8", linestyle="dashed", label="follow seeded at set-up"))
        _legend_below(ax, handles, ncol=2, title="node: received during the run · line: from → to", gap=0.01,
                      spacing=1.0 + 0.04 * size(top) ** 0.5)
    else:
        note = f"\n({plural(seeded.number_of_edges(), 'follow')} seeded at set-up)" if seeded.number_of_edges() else ""
        _empty(ax, "no interactions between agents during the run" + note)
    _style(ax, TITLES["interactions"] + " during the run")
    return fig


FIGURES = {"activity": activity_figure, "action_mix": action_mix_figure, "top_agents": top_agents_figure,
           "interactions": interaction_figure}


def draw_charts(stats: SimStats, sim_dir: Path | str) -> dict[str, Path]:
    """Draw every chart into ``<sim>/report/charts/``; returns name -> PNG path (blocking)."""
    out = Path(sim_dir) / CHARTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    return {name: _save(figure(stats), out / f"{name}.png") for name, figure in FIGURES.items()}
