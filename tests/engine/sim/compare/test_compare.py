"""Exports of a run and the comparison of two runs, on runs played by camel-oasis's own Platform
(tests/helpers/compare_data: run A, and run B forked from it after round 1 with an event injected at
round 2) and the fake OpenAI endpoint for the narrative."""
from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter

import pytest

from engine.config import LLMSection
from engine.i18n import using
from engine.llm.client import LLMClient
from engine.sim.compare.compare import compare_simulations
from engine.sim.compare.divergence import shared_rounds
from engine.sim.compare.travel import ACTIVE, FEED, event_travel
from engine.sim.inject.logged import read_injected
from engine.sim.report.export import export_simulation
from engine.sim.run.output import is_action
from tests.helpers.compare_data import EVENT, STANCES_A, STANCES_B, TRAVEL, two_runs, write_stances
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401


@pytest.fixture
def runs(tmp_path_factory, tmp_path):
    return two_runs(tmp_path_factory, tmp_path)


def logged(folder, platform) -> list[dict]:
    rows = []
    for line in (folder / platform / "actions.jsonl").read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


async def test_exports_parse_and_match_the_log(runs, db, tmp_path):  # noqa: F811
    _, run_b = runs
    await write_stances(db, "simB", STANCES_B)
    files = await export_simulation(db, "simB", run_b, tmp_path / "out")
    with files.csv.open(newline="") as fh:
        table = list(csv.DictReader(fh))
    lines = [json.loads(line) for line in files.jsonl.read_text().splitlines()]
    assert len(table) == len(lines) == files.rows == 6          # 3 rounds x 2 platforms
    for row, line in zip(table, lines):
        rnd, platform = int(row["round"]), row["platform"]
        assert (line["round"], line["platform"]) == (rnd, platform)
        done = [e for e in logged(run_b, platform) if e.get("type") == "action" and e["round"] == rnd - 1
                and is_action(e["action"])]
        mix = Counter(e["action"] for e in done)
        assert int(row["actions"]) == line["actions"] == len(done)
        assert line["actions_by_type"] == dict(mix)
        assert all(int(row[f"actions_{t}"]) == n for t, n in mix.items())
        assert int(row["active_agents"]) == line["active_agents"] == len({e["agent_id"] for e in done})
        assert int(row["posts"]) == mix["create_post"] + mix["quote_post"]
        assert int(row["comments"]) == mix["create_comment"]
        assert int(row["injected"]) == (1 if (rnd, platform) == (2, "twitter") else 0)
        if platform == "twitter":   # stances tracked on Twitter only in this run
            scores = STANCES_B[("twitter", rnd)].values()
            assert int(row["belief_for"]) == line["belief_for"] == sum(s > 0.2 for s in scores)
            assert int(row["belief_against"]) == sum(s < -0.2 for s in scores)
            assert float(row["belief_mean"]) == pytest.approx(sum(scores) / len(scores), abs=1e-3)
        else:
            assert row["belief_for"] == row["belief_mean"] == "" and line["belief_for"] is None
    transcript = files.transcript.read_text()
    assert transcript.index("## Round 1") < transcript.index("## Round 2") < transcript.index("## Round 3")
    assert f"- post 4 · **@newsdesk** · injected event, asked by u1: {EVENT}" in transcript
    assert "- post 5 · **@frank** (for): Finally some good news." in transcript        # score 0.6 in round 2
    assert "- comment 1 on post 4 · **@bob** (for): About time." in transcript
    assert "- post 2 · **@bob** (against): I oppose the fare hike" in transcript        # round 1: -0.6
    assert "- comment 1 on post 1 · **@alice**: Ridership" in transcript                # reddit: no stances


async def test_the_transcript_is_written_in_the_current_language(runs, db, tmp_path):  # noqa: F811
    run_a, run_b = runs
    await write_stances(db, "simB", STANCES_B)
    with using("pt_BR"):   # /sim export in a Portuguese chat: headings and stance labels, posts as written
        transcript = (await export_simulation(db, "simB", run_b, tmp_path / "pt")).transcript.read_text()
    assert transcript.startswith("# Transcrição da simulação `simB`")
    assert transcript.index("## Rodada 1") < transcript.index("## Rodada 2") < transcript.index("## Rodada 3")
    assert f"- post 4 · **@newsdesk** · evento injetado, pedido por u1: {EVENT}" in transcript
    assert "- comentário 1 no post 4 · **@bob** (a favor): About time." in transcript
    assert "a posição de cada autor naquela rodada entre parênteses." in transcript
    with using("th"):
        transcript = (await export_simulation(db, "simA", run_a, tmp_path / "th")).transcript.read_text()
    assert "## รอบที่ 1" in transcript and "ไม่ได้ติดตามจุดยืน" in transcript and "Round" not in transcript


async def test_exports_without_stances_leave_the_belief_columns_empty(runs, db, tmp_path):  # noqa: F811
    run_a, _ = runs
    files = await export_simulation(db, "simA", run_a, tmp_path / "out")   # no sim_stances table at all
    with files.csv.open(newline="") as fh:
        assert {row["belief_for"] for row in csv.DictReader(fh)} == {""}
    assert "stances were not tracked" in files.transcript.read_text()


def test_where_two_runs_part(runs, tmp_path):
    run_a, run_b = runs
    inj_a, inj_b = read_injected(run_a), read_injected(run_b)
    assert inj_a == [] and [(e.platform, e.round, e.post_id) for e in inj_b] == [("twitter", 2, 4)]
    assert shared_rounds(run_a, run_b, inj_a, inj_b) == 1
    assert shared_rounds(run_a, run_a, inj_a, inj_a) == 3
    # a run that differs from round 1: compared from round 1
    other = tmp_path / "other"
    (other / "reddit").mkdir(parents=True)
    (other / "reddit" / "reddit.db").write_bytes((run_a / "reddit" / "reddit.db").read_bytes())
    (other / "reddit" / "actions.jsonl").write_text(json.dumps(
        {"type": "action", "round": 0, "agent_id": 1, "action": "do_nothing", "info": {}}) + "\n")
    assert shared_rounds(run_a, other, inj_a, []) == 0


def test_how_far_the_injected_event_travelled(runs):
    _, run_b = runs
    event, = read_injected(run_b)
    travel = event_travel(run_b, event)
    assert travel.seen_by == FEED
    assert {k: getattr(travel, k) for k in TRAVEL} == TRAVEL
    # without any feed or recommendation record: the agents who acted from the event's round on
    conn = sqlite3.connect(run_b / "twitter" / "twitter.db")
    with conn:
        conn.execute("DELETE FROM trace WHERE action = 'refresh'")
        conn.execute("DELETE FROM rec")
    conn.close()
    travel = event_travel(run_b, event)
    assert travel.seen_by == ACTIVE
    assert travel.saw == {0, 1, 2, 3, 4, 5}          # everyone acted in round 2 or 3; the news desk does not count


def narrator(body: dict) -> str:
    facts = json.loads(body["messages"][-1]["content"])
    assert facts["compared_from_round"] == 2
    return ("After the fork the mood flips: the news post [B twitter post 4] drew a like, a quote "
            "[B twitter post 5] and a reply, while in A the quote [A twitter post 4] kept the protest "
            "going and [A twitter post 2] stayed the most liked. A claim on [A twitter post 5] and "
            "[B reddit post 9] cannot be checked; [twitter post 1] names no run.")


async def test_comparison_cites_both_runs_and_flags_what_it_cannot_find(runs, db, openai_server, tmp_path):  # noqa: F811
    run_a, run_b = runs
    await write_stances(db, "simA", STANCES_A)
    await write_stances(db, "simB", STANCES_B)
    openai_server.responder = narrator
    llm = LLMClient(LLMSection(base_url=openai_server.base_url, model="m", retry_max_wait_s=1), db)
    seen = []

    async def progress(fraction, message):
        seen.append(message)

    result = await compare_simulations(db, llm, ("simA", run_a), ("simB", run_b), tmp_path / "cmp",
                                       job="j1", scope="console:local", progress=progress)
    await llm.close()
    assert result.from_round == 2 and seen[0] == "reading both runs" and "writing the narrative" in seen
    assert result.unverified == ["[A twitter post 5]", "[B reddit post 9]", "[twitter post 1]"]
    assert set(result.citations) >= {"[B twitter post 4]", "[A twitter post 4]", "[A twitter post 2]"}
    text = result.path.read_text()
    assert "[B twitter post 4] drew" in text and "[A twitter post 4] kept" in text
    assert "[A twitter post 5] ⚠ unverified" in text and "[twitter post 1] ⚠ unverified" in text
    assert "- [B twitter post 5] @frank: \"Finally some good news.\"" in text       # sources name the post
    assert "Both runs played round 1 alike; they part from round 2" in text
    assert "| @bob | 1 follow, 1 like post | 1 create comment, 1 like post | -0.60 | +0.40 |" in text
    assert ("twitter: seen by 5 (in their feeds), 1 replied, 1 reposted or quoted, 1 liked" in text
            and "asked by u1" in text)
    assert "- [B twitter post 4] @newsdesk, round 2, engagement 3" in text
    assert "- [A twitter post 2] / [B twitter post 2] @bob: engagement 2 in A, 0 in B" in text
    for name in ("activity", "beliefs"):
        data = result.charts[name].read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000
        assert f"](charts/{name}.png)" in text
    usage = await db.fetchone("SELECT calls FROM llm_usage WHERE job = 'j1' AND scope = 'console:local'")
    assert usage["calls"] == 1
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["unverified_citations"] == result.unverified


async def test_comparison_without_llm_or_budget_says_so(runs, db, openai_server, tmp_path):  # noqa: F811
    run_a, run_b = runs
    result = await compare_simulations(db, None, ("simA", run_a), ("simB", run_b), tmp_path / "plain")
    assert "written without its narrative" in result.path.read_text() and result.citations == []
    llm = LLMClient(LLMSection(base_url=openai_server.base_url, model="m", job_budget_tokens=10), db)
    await llm.usage.record("m", 10, 5, "j2", "console:local")
    result = await compare_simulations(db, llm, ("simA", run_a), ("simB", run_b), tmp_path / "capped", job="j2")
    await llm.close()
    assert "No narrative: this job reached its LLM budget (15 of 10 tokens)" in result.path.read_text()
    assert openai_server.requests == []
