"""Statistics and charts over a small run made by camel-oasis's own Platform."""
from __future__ import annotations

import json
import sqlite3

import pytest

from engine.sim.report.charts import draw_charts
from engine.sim.report.stats import compute_stats
from tests.helpers.simdata import sample_simulation


@pytest.fixture
def sim(tmp_path_factory, tmp_path):
    return sample_simulation(tmp_path_factory, tmp_path)


def test_actions_by_round_and_mix(sim):
    stats = compute_stats(sim)
    assert stats.platforms == ["twitter", "reddit"]
    assert stats.round_source == {"twitter": "log", "reddit": "log"}
    assert stats.rounds == {"twitter": {0: 4, 1: 4, 2: 3}, "reddit": {0: 2, 1: 3, 2: 2}}
    assert stats.mix["twitter"] == {"like_post": 4, "create_post": 2, "follow": 2, "repost": 1,
                                    "quote_post": 1, "do_nothing": 1}
    assert stats.mix["reddit"] == {"create_post": 2, "create_comment": 2, "like_post": 2, "dislike_post": 1}
    assert stats.total_actions == 18


def test_most_engaged_posts_count_likes_comments_and_reposts(sim):
    stats = compute_stats(sim)
    top = [(p.platform, p.post_id, p.author, p.likes, p.comments, p.reposts) for p in stats.posts]
    assert top == [
        ("twitter", 1, "alice", 2, 0, 1),    # two likes, one repost
        ("reddit", 1, "carol", 1, 2, 0),     # one like, two comments (the dislike is not engagement)
        ("twitter", 2, "bob", 1, 0, 1),      # one like, one quote
        ("reddit", 2, "frank", 1, 0, 0),
        ("twitter", 4, "frank", 1, 0, 0),    # the quote is a post of its own; the plain repost is not
    ]
    assert stats.find_post("reddit", 1).dislikes == 1
    assert stats.find_post("twitter", 4).content == "Agreed, commuters pay enough already."
    assert stats.find_post("reddit", 2).round == 2     # from the log: reddit stamps real dates
    assert stats.find_post("twitter", 1).round == 0    # written in round 1; liked in round 2 and 3


def test_agents_and_interactions(sim):
    stats = compute_stats(sim)
    carol = stats.find_agent("@carol")
    assert (carol.actions, carol.posts, carol.engagement) == (4, 1, 3)
    assert carol.by_platform == {"twitter": 2, "reddit": 2}
    assert stats.agents[0].name == "carol"
    assert stats.find_agent(1).name == "bob"
    edges = {(e.platform, e.source, e.target, e.kind) for e in stats.interactions}
    assert edges == {
        ("twitter", "carol", "alice", "like"), ("twitter", "erin", "alice", "like"),
        ("twitter", "dave", "alice", "repost"), ("twitter", "frank", "bob", "quote"),
        ("twitter", "carol", "bob", "like"), ("twitter", "bob", "alice", "follow"),
        ("twitter", "alice", "frank", "like"), ("twitter", "dave", "alice", "follow"),
        ("reddit", "alice", "carol", "comment"), ("reddit", "bob", "carol", "like"),
        ("reddit", "dave", "carol", "comment"), ("reddit", "erin", "carol", "dislike"),
        ("reddit", "carol", "frank", "like"),
    }
    view = json.loads(json.dumps(stats.to_dict(top=3)))
    assert [p["cite"] for p in view["top_posts"]] == ["[twitter post 1]", "[reddit post 1]", "[twitter post 2]"]
    assert view["top_agents"][0]["cite"] == "[agent @carol]"


def test_trace_table_stands_in_without_a_log(sim):
    (sim / "twitter" / "actions.jsonl").unlink()
    stats = compute_stats(sim)
    assert stats.round_source["twitter"] == "trace"
    assert stats.rounds["twitter"] == {0: 4, 1: 4, 2: 3}     # oasis stamps twitter traces with the round
    assert stats.mix["twitter"]["like_post"] == 4


def test_statistics_read_while_the_run_holds_the_database(sim):
    writer = sqlite3.connect(sim / "reddit" / "reddit.db")
    writer.execute("UPDATE post SET num_likes = 99 WHERE post_id = 2")
    try:
        stats = compute_stats(sim)   # uncommitted write: the reader sees the last committed state
    finally:
        writer.rollback()
        writer.close()
    assert stats.find_post("reddit", 2).likes == 1


def test_charts_are_png_files_under_the_report_folder(sim):
    charts = draw_charts(compute_stats(sim), sim)
    assert set(charts) == {"activity", "action_mix", "top_agents", "interactions"}
    for path in charts.values():
        assert path.parent == sim / "report" / "charts"
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_charts_of_an_empty_run(tmp_path):
    from tests.helpers.simdata import build_empty
    sim = build_empty(tmp_path / "empty")
    stats = compute_stats(sim)
    assert stats.total_actions == 0 and stats.posts == [] and stats.interactions == []
    for path in draw_charts(stats, sim).values():
        assert path.read_bytes()[:4] == b"\x89PNG"


def test_quiet_rounds_count_as_rounds(sim):
    with (sim / "reddit" / "actions.jsonl").open("a") as log:
        log.write('\n{"type": "round_start", "round": 3}\n{"type": "round_end", "round": 3, "actions": 0}\n')
    stats = compute_stats(sim)
    assert stats.rounds["reddit"] == {0: 2, 1: 3, 2: 2, 3: 0}
    assert stats.rounds_done == 4
