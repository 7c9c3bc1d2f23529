"""Step 4 end to end: the real child process, camel-oasis and the openai client against a fake
OpenAI-compatible server. Each child start imports oasis (torch, transformers): the tests keep
the number of starts low and reuse each run for several checks."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from engine.db import open_database
from engine.jobs import JobRunner
from engine.sim.run.executor import LocalExecutor
from engine.sim.run.protocol import ACTIONS_LOG, platform_db
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.sim_fixture import make_sim_folder

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI(SocialResponder()) as server:
        yield server


@pytest.fixture
async def db(tmp_path):
    database = await open_database(tmp_path / "bot.sqlite3")
    yield database
    await database.close()


def service(db, llm, **settings) -> SimRuns:
    opts = dict(idle_s=60.0, progress_interval_s=0.2, stop_timeout_s=60.0)
    opts.update(settings)
    return SimRuns(db, LocalExecutor(kill_grace=3.0), LLMTarget(llm.base_url, "fake-model"), RunSettings(**opts))


def jobs_for(db, runs: SimRuns) -> JobRunner:
    jobs = JobRunner(db, max_concurrent=2)
    jobs.register("sim_run", runs.job)
    return jobs


def log_events(folder: Path, platform: str) -> list[dict]:
    return [json.loads(line) for line in (folder / platform / ACTIONS_LOG).read_text().splitlines()]


def db_count(folder: Path, platform: str, sql: str) -> int:
    with sqlite3.connect(platform_db(folder, platform)) as conn:
        return conn.execute(sql).fetchone()[0]


async def until(predicate, timeout: float = 120.0, every: float = 0.1):
    async with asyncio.timeout(timeout):
        while not (result := await predicate()):
            await asyncio.sleep(every)
    return result


async def test_run_both_platforms_with_interviews_during_and_after(tmp_path, db, llm):
    folder = tmp_path / "sim"
    cfg = make_sim_folder(folder, agents=6, rounds=3)
    runs = service(db, llm)
    jobs = jobs_for(db, runs)
    llm.responder = SocialResponder(delay=0.15)  # rounds long enough to ask during one
    progress: list = []
    jobs.subscribe(lambda e: progress.append(e.job.message) if e.kind == "progress" else None)
    job = await jobs.submit("sim_run", {"sim_id": "s1", "folder": str(folder)}, scope="console:local")

    async def some_round_done():
        state = await runs.get("s1")
        return state and any(state.rounds_done.values()) and state.status == "running"
    await until(some_round_done)
    during = await runs.interview("s1", [1], "Will you pay the toll?", ["twitter"], asked_by="test")
    assert len(during) == 1 and during[0].name == "Ben" and "Will you pay the toll?" in during[0].answer
    assert during[0].round < cfg.time.rounds

    finished = await jobs.wait(job.id)
    assert finished.state == "done", finished.error
    assert finished.result["rounds_done"] == {"twitter": 3, "reddit": 3}
    assert any("round" in m and "actions" in m for m in progress)
    state = await runs.get("s1")
    assert state.status == "idle" and state.live  # kept open for interviews

    for platform, members in (("twitter", 6), ("reddit", 4)):  # agents 0 and 4 are on Twitter only
        events = log_events(folder, platform)
        ends = [e for e in events if e["type"] == "round_end"]
        assert [e["round"] for e in ends] == [0, 1, 2]
        assert events[-1]["type"] == "simulation_end" and events[-1]["rounds_done"] == 3
        actions = [e for e in events if e["type"] == "action"]
        assert actions and {e["agent_id"] for e in actions} <= set(range(6))
        assert sum(e["llm_steps"] for e in ends) == 3 * members  # everyone active, one step each
        assert db_count(folder, platform, "SELECT count(*) FROM post") >= 2
        assert db_count(folder, platform, "SELECT count(*) FROM trace WHERE action='interview'") >= (
            1 if platform == "twitter" else 0)
    # the initial post went out on both platforms in round 0, the event on Reddit in round 1
    assert any(e["info"].get("content") == "The toll starts Monday." and e["round"] == 0
               for e in log_events(folder, "reddit") if e["type"] == "action")
    assert any(e["info"].get("content") == "BREAKING: council delays the toll" and e["round"] == 1
               for e in log_events(folder, "reddit") if e["type"] == "action")
    assert not any("BREAKING" in str(e.get("info")) for e in log_events(folder, "twitter"))

    after = await runs.interview("s1", None, "How did it go?", None)  # everyone, both platforms
    assert sorted((a.platform, a.agent_id) for a in after) == sorted(
        [("twitter", i) for i in range(6)] + [("reddit", i) for i in (1, 2, 3, 5)])
    assert all(a.answer and not a.error for a in after)

    assert await runs.release("s1")
    await until(lambda: _status_is(runs, "s1", "completed"), timeout=30)
    reopened = await runs.interview("s1", [3], "Looking back, what changed?", ["reddit"])
    assert reopened[0].answer and reopened[0].round == 3
    assert await runs.release("s1")
    recorded = await runs.interviews("s1")
    assert len(recorded) == 1 + 10 + 1 and recorded[0].question == "Will you pay the toll?"
    assert not (folder / "log").exists() or all(p.stat().st_size == 0 for p in (folder / "log").iterdir())
    await runs.close()


async def _status_is(runs: SimRuns, sim_id: str, status: str) -> bool:
    state = await runs.get(sim_id)
    return state is not None and state.status == status


async def test_stop_kill_and_resume_after_restart(tmp_path, db, llm):
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=6, rounds=4, sim_id="s2")
    llm.responder = SocialResponder(delay=0.3)
    runs = service(db, llm, idle_s=0.5)
    jobs = jobs_for(db, runs)
    job = await jobs.submit("sim_run", {"sim_id": "s2", "folder": str(folder)}, scope="console:local")

    async def rounds_done(at_least: int):
        state = await runs.get("s2")
        return state and state.status == "running" and state.rounds_done and min(
            state.rounds_done.values()) >= at_least

    # 1. a graceful stop lands at the end of a round
    await until(lambda: rounds_done(1))
    assert await runs.stop("s2")
    stopped = await jobs.wait(job.id)
    assert stopped.state == "failed" and "stopped after round" in stopped.error
    state = await runs.get("s2")
    assert state.status == "stopped" and not state.live
    done_at_stop = dict(state.rounds_done)
    assert 1 <= min(done_at_stop.values()) < 4

    # 2. a restart: new job runner and run service over the same database resume the run
    runs = service(db, llm, idle_s=0.5)
    jobs = jobs_for(db, runs)
    await jobs.recover()
    await runs.recover()
    await jobs.resume(job.id)
    await until(lambda: rounds_done(min(done_at_stop.values()) + 1))
    state = await runs.get("s2")
    assert "resumed at round" in state.restart_reason

    # 3. kill -9 of the child is detected and reported
    os.kill(state.pid, signal.SIGKILL)
    crashed = await jobs.wait(job.id)
    assert crashed.state == "failed" and "killed by signal 9" in crashed.error
    assert (await runs.get("s2")).status == "failed"

    # 4. and the run resumes from its last checkpoint to the end
    await jobs.resume(job.id)
    finished = await jobs.wait(job.id)
    assert finished.state == "done", finished.error
    for platform in ("twitter", "reddit"):
        events = log_events(folder, platform)
        ends = [e["round"] for e in events if e["type"] == "round_end"]
        assert ends == [0, 1, 2, 3]  # rounds cut short by the stop or the kill are not duplicated
        posts_in_log = sum(1 for e in events if e["type"] == "action" and e["action"] == "create_post")
        assert posts_in_log == db_count(folder, platform, "SELECT count(*) FROM post WHERE original_post_id IS NULL")
    await until(lambda: _status_is(runs, "s2", "completed"), timeout=30)
    await runs.close()
