"""Beliefs per round on one real run: the real child process, camel-oasis and the openai client
against the fake server (agents: ``SocialResponder``; stance calls: ``StanceResponder``), with the
stance observer on the run service. The run is made once for the module (its own event loop);
each test reads a copy of its database."""
from __future__ import annotations

import asyncio
import json
import math
import shutil

import pytest
from PIL import Image

from bot.adapters.console import ConsoleOut, ConsoleReply
from bot.features.simulation.report import post_report
from engine.config import LLMSection
from engine.db import open_database
from engine.llm import LLMClient
from engine.sim.report import diagnostics
from engine.sim.run.executor import LocalExecutor
from engine.sim.run.observers import RoundDone
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from engine.sim.stance import tracking as stance
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.fakes.stance_responder import StanceResponder, WithStances
from tests.helpers.sim import make_sim_folder

pytestmark = pytest.mark.timeout(240)
ROUNDS, AGENTS, BATCH = 3, 6, 4
SIM, JOB = "st1", "job-st1"


def llm_section(server: FakeOpenAI, **caps) -> LLMSection:
    return LLMSection(base_url=server.base_url, model="fake-model", retry_max_wait_s=0.05, **caps)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of 6 agents x 3 rounds; returns (folder, database file, stance responder, server)."""
    base = tmp_path_factory.mktemp("stance")
    folder, path = base / "sim", base / "run.sqlite3"
    make_sim_folder(folder, agents=AGENTS, rounds=ROUNDS, sim_id=SIM)
    stances = StanceResponder()
    server = FakeOpenAI(WithStances(SocialResponder(), stances)).start()

    async def go() -> None:
        db = await open_database(path)
        llm = LLMClient(llm_section(server), db)
        runs = SimRuns(db, LocalExecutor(kill_grace=3.0), LLMTarget(server.base_url, "fake-model"),
                       RunSettings(idle_s=0.0, progress_interval_s=0.2),
                       observers=[stance.observer(db, llm, batch=BATCH)])

        async def progress(*_args, **_kwargs) -> None:
            pass

        try:
            await runs.run(SIM, folder, progress, job_id=JOB, scope="console:local")
        finally:
            await runs.executor.close()
            await runs.close()
            await llm.close()
            await db.close()

    asyncio.run(go())
    yield folder, path, stances, server
    server.stop()


@pytest.fixture
async def db(run, tmp_path):
    copy = tmp_path / "copy.sqlite3"
    shutil.copyfile(run[1], copy)
    database = await open_database(copy)
    yield database
    await database.close()


async def test_every_completed_round_has_a_split_per_platform_and_carried_agents_keep_their_score(run, db):
    folder, _, stances, server = run
    splits = await stance.split_by_round(db, SIM)
    assert {(s.platform, s.round) for s in splits} == {(p, r) for p in ("twitter", "reddit")
                                                         for r in range(1, ROUNDS + 1)}
    for s in splits:
        assert s.total > 0 and -1.0 <= s.mean <= 1.0
    rows = await db.fetchall("SELECT s.*, c.agent_id IS NOT NULL AS carried FROM sim_stances s LEFT JOIN"
                             " sim_stances_carried c USING (sim_id, platform, round, agent_id) WHERE sim_id = ?"
                             " ORDER BY platform, round, agent_id", (SIM,))
    assert all(-1.0 <= r["score"] <= 1.0 and r["label"] == stance.label_of(r["score"]) for r in rows)
    # only agents who took a step that round: agent 4 is on Twitter only (agent 0 too, but its
    # scheduled first post goes to both platforms)
    assert not [r for r in rows if r["platform"] == "reddit" and r["agent_id"] == 4]
    assert {r["agent_id"] for r in rows if r["platform"] == "reddit" and r["round"] > 1} <= {1, 2, 3, 5}
    # an agent that acted without content (did nothing) keeps its last score, marked carried
    carried = [r for r in rows if r["carried"]]
    assert carried, "the fake's agents do nothing every third step"
    for r in carried:
        before = await db.fetchval("SELECT score FROM sim_stances WHERE sim_id=? AND platform=? AND agent_id=?"
                                   " AND round < ? ORDER BY round DESC LIMIT 1",
                                   (SIM, r["platform"], r["agent_id"], r["round"]))
        prior = {"supportive": 0.5, "opposing": -0.5, "neutral": 0.0}[("supportive", "opposing", "neutral")[
            r["agent_id"] % 3]]
        assert r["score"] == pytest.approx(before if before is not None else prior)
    # batched: one call per BATCH classified agents per platform and round, all counted for the job
    spoken = {}
    for r in rows:
        if not r["carried"]:
            spoken[(r["platform"], r["round"])] = spoken.get((r["platform"], r["round"]), 0) + 1
    assert stances.calls == sum(math.ceil(n / BATCH) for n in spoken.values())
    assert await db.fetchval("SELECT sum(calls) FROM llm_usage WHERE job = ?", (JOB,)) == stances.calls
    # the prompt shows what the agents did, in their words
    asked = [m["content"] for body in server.requests if StanceResponder.handles(body)
             for m in body["messages"] if m["role"] == "user"]
    assert any('posted: "Post ' in text for text in asked)
    assert any('commented on "' in text for text in asked) and any('liked: "' in text for text in asked)


async def test_a_held_round_is_not_asked_again_and_a_reached_budget_skips_with_a_note(run, db):
    folder, _, stances, server = run
    before = stances.calls
    llm = LLMClient(llm_section(server), db)
    try:
        done = RoundDone(SIM, folder, "twitter", ROUNDS, JOB, "console:local")
        assert await stance.classify_round(db, llm, done, BATCH) == "held already"
        assert stances.calls == before
    finally:
        await llm.close()
    # the last round again, now that the job's token cap is reached
    await db.execute("DELETE FROM sim_stances WHERE sim_id=? AND platform='twitter' AND round=?", (SIM, ROUNDS))
    capped = LLMClient(llm_section(server, job_budget_tokens=1), db)
    try:
        outcome = await stance.classify_round(db, capped, done, BATCH)
    finally:
        await capped.close()
    assert outcome.startswith("skipped: LLM budget reached") and stances.calls == before
    assert not await db.fetchval("SELECT count(*) FROM sim_stances WHERE platform='twitter' AND round=?", (ROUNDS,))
    line = await stance.beliefs_line(db, SIM)
    assert f"stances not classified for twitter round {ROUNDS}" in line and "job_budget_tokens" in line
    assert f"reddit after round {ROUNDS}" in line and "for ·" in line


async def test_the_report_section_draws_the_split_and_a_replay_posted_after_the_png_charts(run, db, tmp_path,
                                                                                         capsys):
    folder, *_ = run
    report = tmp_path / "sim" / "report"
    charts, text = await diagnostics.report_section(db, SIM, folder, report / "charts")
    assert set(charts) == {"beliefs", "belief_replay"}
    assert charts["beliefs"].suffix == ".png" and Image.open(charts["beliefs"]).size[0] > 400
    gif = Image.open(charts["belief_replay"])
    assert gif.format == "GIF" and gif.n_frames == ROUNDS and gif.size[0] == 600
    assert charts["belief_replay"].stat().st_size < 2 * 1024 * 1024
    splits = await stance.split_by_round(db, SIM)
    for s in splits:  # the table holds every round of both platforms
        assert f"| {s.platform} | {s.round} | {s.for_} | {s.neutral} | {s.against} |" in text
    assert "Participation:" in text and "Cross-platform:" in text and "Steps skipped or failed: 0 of" in text
    assert "**Health:" in text
    # the bot posts the replay after the PNG charts
    (report / "report.md").write_text("# r", encoding="utf-8")
    capsys.readouterr()
    await post_report(ConsoleReply(ConsoleOut(colour=False)), SIM, report.parent)
    uploads = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("[image]", "[file]"))]
    assert [line.split()[1].rsplit("/", 1)[-1] for line in uploads] == ["beliefs.png", "belief_replay.gif",
                                                                         "report.md"]
    assert uploads[1].startswith("[image]") and uploads[1].endswith("— Belief replay, one frame per round")


def test_the_stance_prompt_lists_what_each_agent_did(run):
    folder, *_ = run
    deeds = stance.round_deeds(folder, "twitter", 1)
    assert set(deeds) <= set(range(AGENTS)) and deeds
    said = [d for ds in deeds.values() for d in ds]
    assert all(d.split(":", 1)[0] in ("posted", "liked", "disliked", "reposted")
               or d.startswith(("commented", "quoted")) for d in said), said
    lines = [json.loads(x) for x in (folder / "twitter" / "actions.jsonl").read_text().splitlines()]
    acted = {x["agent_id"] for x in lines if x["type"] in ("action", "step_skipped") and x["round"] == 0}
    assert set(deeds) == acted


async def test_the_run_s_rounds_classified_again_into_each_backend_give_its_stances(run, db_url):
    """The observer's writes and reads (latest score before a round, carried agents, the split)
    on SQLite and PostgreSQL alike: classifying the run's rounds again into an empty database
    stores the stances the run stored."""
    folder, path, _, server = run
    ran = await open_database(path)
    again = await open_database(db_url)
    llm = LLMClient(llm_section(server), again)
    try:
        for platform in ("twitter", "reddit"):
            for round_no in range(1, ROUNDS + 1):
                done = RoundDone(SIM, folder, platform, round_no, JOB, "console:local")
                assert (await stance.classify_round(again, llm, done, BATCH)).endswith("carried")
        assert await stance.agent_scores(again, SIM) == await stance.agent_scores(ran, SIM)
        assert [(s.platform, s.round, s.for_, s.neutral, s.against, s.mean) for s in await stance.split_by_round(
            again, SIM)] == [(s.platform, s.round, s.for_, s.neutral, s.against, pytest.approx(s.mean))
                             for s in await stance.split_by_round(ran, SIM)]   # avg() may round differently
        carried = "SELECT platform, round, agent_id FROM sim_stances_carried ORDER BY platform, round, agent_id"
        assert [tuple(r) for r in await again.fetchall(carried)] == [tuple(r) for r in await ran.fetchall(carried)]
        assert await again.fetchval("SELECT sum(calls) FROM llm_usage WHERE job = ?", (JOB,)) > 0
    finally:
        await llm.close()
        await again.close()
        await ran.close()
