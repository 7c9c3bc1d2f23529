"""PNG charts of a run, drawn with matplotlib's object API (no pyplot global state), so
several reports can render at once in worker threads; call through ``run_cpu``.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import networkx as nx  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from engine.sim.report.stats import SimStats  # noqa: E402

CHARTS_DIR = Path("report") / "charts"
COLOURS = {"twitter": "#1d9bf0", "reddit": "#ff4500"}
TITLES = {
    "activity": "Activity over rounds",
    "action_mix": "Action mix",
    "top_agents": "Most active and engaged agents",
    "interactions": "Who interacted with whom",
}


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def activity_chart(stats: SimStats, path: Path) -> Path:
    fig = Figure(figsize=(7, 3.8))
    ax = fig.add_subplot()
    drawn = False
    for platform, rounds in stats.rounds.items():
        if rounds:
            xs = list(range(min(rounds), max(rounds) + 1))
            ax.plot(xs, [rounds.get(x, 0) for x in xs], marker="o", label=platform,
                    color=COLOURS.get(platform))
            drawn = True
    if drawn:
        ax.set_xlabel("round")
        ax.set_ylabel("actions")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
        ax.grid(alpha=0.3)
    else:
        _empty(ax, "no actions recorded")
    ax.set_title(TITLES["activity"])
    return _save(fig, path)


def action_mix_chart(stats: SimStats, path: Path) -> Path:
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    actions = sorted({a for m in stats.mix.values() for a in m},
                     key=lambda a: -sum(m.get(a, 0) for m in stats.mix.values()))
    if actions:
        width = 0.8 / max(1, len(stats.mix))
        for i, (platform, mix) in enumerate(stats.mix.items()):
            ax.bar([x + i * width for x in range(len(actions))], [mix.get(a, 0) for a in actions],
                   width, label=platform, color=COLOURS.get(platform))
        ax.set_xticks([x + width * (len(stats.mix) - 1) / 2 for x in range(len(actions))])
        ax.set_xticklabels(actions, rotation=30, ha="right")
        ax.set_ylabel("count")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
    else:
        _empty(ax, "no actions recorded")
    ax.set_title(TITLES["action_mix"])
    return _save(fig, path)


def top_agents_chart(stats: SimStats, path: Path, top: int = 10) -> Path:
    agents = [a for a in stats.agents if a.actions or a.engagement][:top][::-1]
    fig = Figure(figsize=(7, 0.5 * max(4, len(agents)) + 1))
    ax = fig.add_subplot()
    if agents:
        ys = range(len(agents))
        ax.barh([y - 0.2 for y in ys], [a.actions for a in agents], 0.4, label="actions taken", color="#4c72b0")
        ax.barh([y + 0.2 for y in ys], [a.engagement for a in agents], 0.4, label="engagement received",
                color="#dd8452")
        ax.set_yticks(list(ys))
        ax.set_yticklabels([f"@{a.name}" for a in agents])
        ax.legend(loc="lower right")
    else:
        _empty(ax, "no agent acted")
    ax.set_title(TITLES["top_agents"])
    return _save(fig, path)


def interaction_chart(stats: SimStats, path: Path, max_nodes: int = 40) -> Path:
    graph = nx.DiGraph()
    for e in stats.interactions:
        w = graph.get_edge_data(e.source, e.target, {}).get("weight", 0)
        graph.add_edge(e.source, e.target, weight=w + e.count)
    if graph.number_of_nodes() > max_nodes:   # keep the busiest agents readable
        keep = sorted(graph.nodes, key=lambda n: -graph.degree(n, weight="weight"))[:max_nodes]
        graph = graph.subgraph(keep).copy()
    fig = Figure(figsize=(7, 6))
    ax = fig.add_subplot()
    if graph.number_of_edges():
        pos = nx.spring_layout(graph, seed=7, weight="weight")
        received = dict(graph.in_degree(weight="weight"))
        nx.draw_networkx_nodes(graph, pos, ax=ax, node_color="#8fb8de",
                               node_size=[300 + 150 * received.get(n, 0) for n in graph.nodes])
        nx.draw_networkx_edges(graph, pos, ax=ax, arrows=True, edge_color="#777777", alpha=0.7,
                               width=[0.8 + d["weight"] for _, _, d in graph.edges(data=True)])
        nx.draw_networkx_labels(graph, pos, ax=ax, labels={n: f"@{n}" for n in graph.nodes}, font_size=8)
        ax.set_axis_off()
    else:
        _empty(ax, "no interactions between agents")
    ax.set_title(TITLES["interactions"])
    return _save(fig, path)


def draw_charts(stats: SimStats, sim_dir: Path | str) -> dict[str, Path]:
    """Draw every chart into ``<sim>/report/charts/``; returns name -> PNG path (blocking)."""
    out = Path(sim_dir) / CHARTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    return {
        "activity": activity_chart(stats, out / "activity.png"),
        "action_mix": action_mix_chart(stats, out / "action_mix.png"),
        "top_agents": top_agents_chart(stats, out / "top_agents.png"),
        "interactions": interaction_chart(stats, out / "interactions.png"),
    }
