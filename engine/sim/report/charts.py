"""PNG charts of a run, drawn with matplotlib's object API (no pyplot global state), so
several reports can render at once in worker threads; call through ``run_cpu``.

Text is in the current language (engine.i18n: titles, axis labels and legends are msgids) and
falls back per glyph to a Thai font. Each chart explains itself at Discord's preview size: axis
labels, integer ticks for counts, rounds numbered from 1 as the chat numbers them, legends placed
where they cover no data.
Charts over rounds mark the events injected into the run (``mark_injected``): a dashed line at
the round each went out in, and under the axes a legend of who posted what. Text is drawn as
written: mathtext is off, since labels carry what users and documents say.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# Labels carry text from users and documents (agent names, injected events): a `$` in them must
# never start mathtext, which fails on input like an unclosed \frac{ (the report charts, the
# belief pictures and the comparison charts import this module, so this holds for all of them).
matplotlib.rcParams["text.parse_math"] = False


def _thai_capable_fonts() -> None:
    """Text falls back per glyph from DejaVu Sans (matplotlib's own: Latin, Portuguese) to Noto Sans
    Thai (the fontpkg-noto-sans-thai package, OFL), so a Thai title draws no tofu boxes. Every chart
    module imports this one, so it holds for all of them."""
    from fontpkg_noto_sans_thai import FAMILY, ROOT
    from matplotlib import font_manager
    for path in sorted((ROOT / "files").glob("*.ttf")):
        font_manager.fontManager.addfont(str(path))
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", FAMILY]


_thai_capable_fonts()

import networkx as nx  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from engine.i18n import N_, _  # noqa: E402
from engine.sim.inject.logged import InjectedEvent  # noqa: E402
from engine.sim.report.stats import SimStats  # noqa: E402
from engine.words import plural  # noqa: E402

CHARTS_DIR = Path("report") / "charts"
COLOURS = {"twitter": "#1d9bf0", "reddit": "#ff4500"}
# The charts' titles and their captions in the chat (msgids, translated where drawn or posted)
TITLES = {
    "activity": N_("Activity over rounds"),
    "action_mix": N_("Action mix"),
    "top_agents": N_("Most active and engaged agents"),
    "interactions": N_("Who interacted with whom"),
    "beliefs": N_("Beliefs per round"),                  # engine.sim.report.belief_charts
    "belief_replay": N_("Belief replay, one frame per round"),
    # an ensemble's (engine.sim.ensemble.charts)
    "ensemble_beliefs": N_("Beliefs per round over all runs: median and range"),
    "ensemble_runs": N_("Mean stance per round, run by run"),
    "ensemble_activity": N_("Actions per round over all runs: median and range"),
}


# Discord shows a chart about 400-550 px wide in the channel: figures are about 7 in at 110 dpi
# (770 px), so text is set large enough to stay readable when shrunk by half.
TITLE_SIZE, LABEL_SIZE, TICK_SIZE = 15, 13, 11


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside the axes are kept
    return path


def _style(ax, title: str, xlabel: str = "", ylabel: str = "", loc: str = "center") -> None:
    """Title and axis labels, msgids written in the current language (engine.i18n)."""
    ax.set_title(_(title), fontsize=TITLE_SIZE, loc=loc)
    if xlabel:
        ax.set_xlabel(_(xlabel), fontsize=LABEL_SIZE)
    if ylabel:
        ax.set_ylabel(_(ylabel), fontsize=LABEL_SIZE)
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
        more = _(" (+{n} more)", n=len(events) - 2) if len(events) > 2 else ""
        handles.append(Line2D([], [], color=INJECTED_COLOUR, linestyle="--", linewidth=1.5,
                              label=_("round {n}: {said}", n=number, said=said) + more))
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
        if injected and (platforms := ax.get_legend()) is not None:  # a second legend, under the axes:
            ax.add_artist(platforms)                                  # the platforms' one stays
            _legend_below(ax, injected[:6], ncol=1, title=_("injected events"), gap=0.18)
        _style(ax, TITLES["activity"], N_("round"), N_("actions"), loc="left")
    else:
        _empty(ax, _("no actions recorded"))
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
        _style(ax, TITLES["action_mix"], "", N_("count"), loc="left")
    else:
        _empty(ax, _("no actions recorded"))
        _style(ax, TITLES["action_mix"])
    return fig


def top_agents_figure(stats: SimStats, top: int = 10) -> Figure:
    agents = [a for a in stats.agents if a.actions or a.engagement][:top][::-1]
    fig = Figure(figsize=(7, 0.55 * max(4, len(agents)) + 1.6))
    ax = fig.add_subplot()
    if agents:
        ys = range(len(agents))
        ax.barh([y + 0.2 for y in ys], [a.actions for a in agents], 0.4, label=_("actions taken"), color="#4c72b0")
        ax.barh([y - 0.2 for y in ys], [a.engagement for a in agents], 0.4, label=_("engagement received"),
                color="#dd8452")
        ax.set_yticks(list(ys))
        ax.set_yticklabels([f"@{a.name}" for a in agents])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(axis="x", alpha=0.3)
        _style(ax, TITLES["top_agents"], N_("count (actions taken; likes, comments and reposts received)"))
        _legend_below(ax, ncol=2, gap=0.22)
    else:
        _empty(ax, _("no agent acted"))
        _style(ax, TITLES["top_agents"])
    return fig


def interaction_figure(stats: SimStats, max_nodes: int = 25) -> Figure:
    """Who liked, commented, reposted, quoted or followed whom during the run. The follow graph
    seeded at set-up is drawn faint (dashed, light), between the agents shown only; node size
    is interactions received, edge width interactions along that edge; both have a legend."""
    graph: nx.DiGraph = nx.DiGraph()
    seeded: nx.DiGraph = nx.DiGraph()
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
                           label=plural(n, "{n} interaction received", "{n} interactions received")) for n in sizes]
                   + [Line2D([], [], color="#555555", linewidth=width(n),
                             label=plural(n, "{n} interaction", "{n} interactions"))
                      for n in widths])
        if faint.number_of_edges():
            handles.append(Line2D([], [], color="#c8c8c8", linestyle="dashed", label=_("follow seeded at set-up")))
        _legend_below(ax, handles, ncol=2, title=_("node: received during the run · line: from → to"), gap=0.01,
                      spacing=1.0 + 0.04 * size(top) ** 0.5)
    else:
        edges = seeded.number_of_edges()
        note = "\n" + plural(edges, "({n} follow seeded at set-up)", "({n} follows seeded at set-up)") if edges else ""
        _empty(ax, _("no interactions between agents during the run") + note)
    _style(ax, N_("Who interacted with whom during the run"))
    return fig


FIGURES = {"activity": activity_figure, "action_mix": action_mix_figure, "top_agents": top_agents_figure,
           "interactions": interaction_figure}


def draw_charts(stats: SimStats, sim_dir: Path | str) -> dict[str, Path]:
    """Draw every chart into ``<sim>/report/charts/``; returns name -> PNG path (blocking)."""
    out = Path(sim_dir) / CHARTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    return {name: _save(figure(stats), out / f"{name}.png") for name, figure in FIGURES.items()}
