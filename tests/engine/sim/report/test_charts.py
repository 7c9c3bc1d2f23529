"""The report's charts explain themselves: run interactions apart from the seeded follow graph,
legends that cover no data, integer ticks, labelled axes, rounds numbered from 1."""
from __future__ import annotations

import sqlite3

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from engine.sim.report.charts import (
    action_mix_figure,
    activity_figure,
    draw_charts,
    interaction_figure,
    top_agents_figure,
)
from engine.sim.report.stats import SEEDED_FOLLOW, AgentStat, SimStats, compute_stats
from tests.helpers.simdata import sample_simulation

# follower -> followee, as the run step seeds them before round 1 (in the table, in no logged action)
SEEDED = [(2, 0), (3, 0), (4, 0), (5, 0), (0, 1), (2, 1), (4, 1), (5, 2), (0, 3), (1, 4)]


@pytest.fixture
def sim(tmp_path_factory, tmp_path):
    sim = sample_simulation(tmp_path_factory, tmp_path)
    with sqlite3.connect(sim / "twitter" / "twitter.db") as conn:
        conn.executemany("INSERT INTO follow(follower_id, followee_id, created_at) VALUES (?, ?, 0)", SEEDED)
    return sim


def drawn(fig):
    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def texts(fig) -> str:
    return " | ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


def test_seeded_follows_are_told_apart_from_follows_made_in_the_run(sim):
    stats = compute_stats(sim)
    seeded = {(e.source_id, e.target_id) for e in stats.interactions if e.kind == SEEDED_FOLLOW}
    assert seeded == set(SEEDED)
    run_follows = {(e.source, e.target) for e in stats.interactions if e.kind == "follow"}
    assert run_follows == {("bob", "alice"), ("dave", "alice")}   # the two the agents made
    assert all(i["kind"] != SEEDED_FOLLOW for i in stats.to_dict(top=10)["interactions"])


def test_interaction_network_draws_the_run_with_a_legend_for_size_and_width(sim):
    stats = compute_stats(sim)
    fig = interaction_figure(stats)
    drawn(fig)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "1 interaction received" in legend and "5 interactions received" in legend  # alice: 2 likes,
    assert "1 interaction" in legend and "2 interactions" in legend                    # a repost, 2 follows
    assert "follow seeded at set-up" in legend
    assert "during the run" in ax.get_title()
    # the run's edges are drawn as arrows; the seeded graph only faint, between the agents shown
    run_edges = {(e.source, e.target) for e in stats.interactions if e.during_run}
    arrows = [p for p in ax.patches if p.__class__.__name__ == "FancyArrowPatch"]
    assert len(arrows) == len(run_edges)


def test_a_run_without_interactions_says_so_and_counts_the_seeded_follows(tmp_path):
    from tests.helpers.simdata import build_empty
    sim = build_empty(tmp_path / "empty")
    with sqlite3.connect(sim / "twitter" / "twitter.db") as conn:
        conn.executemany("INSERT INTO follow(follower_id, followee_id, created_at) VALUES (?, ?, 0)", SEEDED[:3])
    fig = interaction_figure(compute_stats(sim))
    assert "no interactions between agents during the run\n(3 follows seeded at set-up)" in texts(fig)


def small_counts() -> SimStats:
    agents = [AgentStat(i, name, actions=a, engagement=e)
              for i, (name, a, e) in enumerate([("ann", 1, 1), ("ben", 1, 0), ("cy", 0, 1)])]
    return SimStats(["twitter"], {"twitter": {0: 1, 1: 1}}, {"twitter": {"like_post": 1, "create_post": 1}},
                    [], agents, [], {"twitter": "log"})


@pytest.mark.parametrize("stats", [small_counts, "sample"])
def test_top_agents_legend_covers_no_bar_and_ticks_are_whole_numbers(stats, sim):
    stats = small_counts() if stats is small_counts else compute_stats(sim)
    fig = top_agents_figure(stats)
    renderer = drawn(fig)
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert bars and not any(legend.overlaps(b) for b in bars)
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert ax.get_xlabel().startswith("count")


def test_activity_numbers_rounds_from_one_and_legends_sit_outside_the_data(sim):
    stats = compute_stats(sim)
    for figure in (activity_figure, action_mix_figure):
        fig = figure(stats)
        renderer = drawn(fig)
        ax = fig.axes[0]
        assert not ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
        assert all(float(t).is_integer() for t in ax.get_yticks())
    ax = activity_figure(stats).axes[0]
    xs = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
    assert xs == [1, 2, 3] and ax.get_xlabel() == "round"    # three rounds, as the chat counts them


def test_charts_stay_readable_at_discord_preview_size(sim):
    from PIL import Image
    for path in draw_charts(compute_stats(sim), sim).values():
        width, height = Image.open(path).size
        assert 600 <= width <= 1000 and height <= 1000, (path.name, width, height)


MATH = r"$\frac{"   # matplotlib's mathtext would parse this, and fail on it


def test_text_from_users_and_agents_is_drawn_as_written_never_as_math(sim, tmp_path):
    """Agent names come from the documents, injected events from /sim inject: a `$` in them must
    not make matplotlib parse mathtext (an unclosed ``\\frac{`` failed the whole report)."""
    import dataclasses

    from engine.sim.inject.logged import InjectedEvent

    stats = compute_stats(sim)
    name = stats.agents[0].name

    def rename(who: str) -> str:
        return f"{MATH} {who}" if who == name else who

    stats.agents = [dataclasses.replace(a, name=rename(a.name)) for a in stats.agents]
    stats.interactions = [dataclasses.replace(e, source=rename(e.source), target=rename(e.target))
                          for e in stats.interactions]
    stats.injected = [InjectedEvent("e1", 1, f"{MATH} Desk", rf"fares cut by $\frac{{1}}{{2}}$ and {MATH}", "ann")]
    charts = draw_charts(stats, tmp_path / "out")
    assert set(charts) >= {"activity", "top_agents", "interactions"}
    for path in charts.values():
        assert path.stat().st_size > 10_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = top_agents_figure(stats)
    drawn(fig)
    assert f"{MATH} {name}" in texts(fig)
    fig = activity_figure(stats)
    drawn(fig)
    assert r"fares cut by $\frac{1}{2}$" in texts(fig)
