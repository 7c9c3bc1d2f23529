"""Control of step 4: kill -9 of the child, resume after a restart, a graceful stop mid-run.
The real child process, camel-oasis and the openai client run against the fake server; each
child start imports oasis (torch, transformers), so one run serves every check, on both backends
(the run's state, rounds and job rows must survive the kill and the restart on either)."""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.sim.environment.models import CONFIG_FILE
from engine.sim.run.executor import LocalExecutor, child_pid_alive
from engine.sim.run.observers import RoundDone
from engine.sim.run.output import platform_db
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.helpers.sim import jobs_for, log_events, make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI(SocialResponder()) as server:
        yield server


def service(db, llm, observers=None, **settings) -> SimRuns:
    opts: dict[str, Any] = dict(idle_s=60.0, progress_interval_s=0.2, stop_timeout_s=60.0)
    opts.update(settings)
    return SimRuns(db, LocalExecutor(kill_grace=3.0), LLMTarget(llm.base_url, "fake-model"), RunSettings(**opts),
                   observers=observers)


def db_count(folder: Path, platform: str, sql: str) -> int:
    with sqlite3.connect(platform_db(folder, platform)) as conn:
        return conn.execute(sql).fetchone()[0]


async def test_kill_resume_after_restart_and_stop(tmp_path, db, llm):
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=6, rounds=8, sim_id="s2")
    llm.responder = SocialResponder(delay=0.3)
    runs = service(db, llm, idle_s=0.5)
    jobs = jobs_for(db, runs)
    job = await jobs.submit("sim_run", {"sim_id": "s2", "folder": str(folder)}, scope="console:local")

    async def rounds_done(at_least: int):
        state = await runs.get("s2")
        return state and state.status == "running" and state.rounds_done and min(
            state.rounds_done.values()) >= at_least

    # 1. kill -9 of the child is detected and reported
    await until(lambda: rounds_done(1), 120)
    state = await runs.get("s2")
    os.kill(state.pid, signal.SIGKILL)
    crashed = await jobs.wait(job.id)
    assert crashed.state == "failed" and "killed by signal 9" in crashed.error
    state = await runs.get("s2")
    assert state.status == "failed" and not state.live
    killed_at = min(state.rounds_done.values())

    # 2. a restart: a new job runner and run service over the same database resume the run
    #    from its last completed round, with the agents' memories of that round; its round
    #    observers are first called for the rounds completed before the kill
    observed: list[tuple[str, int]] = []

    async def observe(done: RoundDone) -> None:
        observed.append((done.platform, done.round))

    runs = service(db, llm, observers=[observe], idle_s=0.5)
    jobs = jobs_for(db, runs)
    await jobs.recover()
    await runs.recover()
    await jobs.resume(job.id)
    await until(lambda: rounds_done(killed_at + 1), 120)
    state = await runs.get("s2")
    assert "twitter resumed at round" in state.restart_reason and "reddit resumed at round" in state.restart_reason

    # 3. a graceful stop lands at the end of a round
    assert await runs.stop("s2")
    stopped = await jobs.wait(job.id)
    assert stopped.state == "stopped" and stopped.error is None
    assert "stopped after round" in stopped.message and "on request" in stopped.message
    state = await runs.get("s2")
    assert state.status == "stopped" and not state.live
    for platform in ("twitter", "reddit"):
        done = state.rounds_done[platform]
        assert killed_at < done < 8
        events = log_events(folder, platform)
        # rounds cut short by the kill are not in the log twice; the stop ended a whole round
        assert [e["round"] for e in events if e["type"] == "round_end"] == list(range(done))
        assert events[-1] == {**events[-1], "type": "simulation_end", "rounds_done": done, "stopped": True}
        posts_in_log = sum(1 for e in events if e["type"] == "action" and e["action"] == "create_post")
        assert posts_in_log == db_count(folder, platform, "SELECT count(*) FROM post WHERE original_post_id IS NULL")
        # every completed round was observed, in order, before the job ended
        rounds = [r for p, r in observed if p == platform]
        assert rounds == list(range(1, done + 1))

    # 4. cancelling the job terminates the child's process group at once
    await jobs.resume(job.id)
    await until(lambda: _live(runs), 120)
    pid = (await runs.get("s2")).pid
    assert child_pid_alive(pid, folder)
    assert await jobs.cancel(job.id)
    assert (await jobs.get(job.id)).state == "cancelled"
    assert not child_pid_alive(pid, folder) and (await runs.get("s2")).status == "cancelled"

    # 5. the bot dies: the child sees its stdin close, ends its round and exits by itself
    await jobs.resume(job.id)
    before = min((await runs.get("s2")).rounds_done.values())
    await until(lambda: rounds_done(before + 1), 120)
    handle = await runs.executor.attach("s2")
    handle.proc.stdin.close()
    assert await asyncio.wait_for(handle.wait(), 60) == 0
    ended = await jobs.wait(job.id)
    assert ended.state == "failed"
    assert "stopped after round" in ended.error and "parent process went away" in ended.error
    state = await runs.get("s2")
    assert state.status == "stopped" and max(state.rounds_done.values()) < 8
    for platform in ("twitter", "reddit"):
        events = log_events(folder, platform)
        assert events[-1]["type"] == "simulation_end" and events[-1]["stopped"]
        assert [e["round"] for e in events if e["type"] == "round_end"] == list(range(state.rounds_done[platform]))
    await runs.close()


async def test_a_run_resumed_at_a_round_in_which_nobody_acts_goes_on_to_its_end(tmp_path, db, llm):
    """A resumed run signs its restored users up again (refused, harmlessly), which leaves the
    platform's database in a write transaction until an action commits; a first round without
    any action then saved its checkpoint against that transaction and waited without end (a
    fork of the soak, from round 1, never finished)."""
    folder = tmp_path / "sim"
    cfg = make_sim_folder(folder, agents=4, rounds=3, sim_id="q1", everyone_everywhere=True)
    for agent in cfg.agents:   # nobody is active at 10:00, the second round
        agent.active_hours = [h for h in agent.active_hours if h != 10]
    (folder / CONFIG_FILE).write_text(cfg.model_dump_json(indent=1), encoding="utf-8")
    llm.responder = SocialResponder()
    first = service(db, llm, idle_s=0.5, max_rounds=1)
    jobs = jobs_for(db, first)
    job = await jobs.submit("sim_run", {"sim_id": "q1", "folder": str(folder)}, scope="console:local")
    assert (await jobs.wait(job.id)).state == "done"
    await jobs.shutdown()
    await first.close()
    then = service(db, llm, idle_s=0.5)
    jobs = jobs_for(db, then)
    job = await jobs.submit("sim_run", {"sim_id": "q1", "folder": str(folder)}, scope="console:local")
    ended = await asyncio.wait_for(jobs.wait(job.id), 150)
    assert ended.state == "done", ended.error
    for platform in ("twitter", "reddit"):
        events = log_events(folder, platform)
        quiet = next(e for e in events if e["type"] == "round_start" and e["round"] == 1)
        assert quiet["active_agents"] == 0 and quiet["scheduled_posts"] == 0
        assert [e["round"] for e in events if e["type"] == "round_end"] == [0, 1, 2]
    await jobs.shutdown()
    await then.close()


async def _live(runs: SimRuns) -> bool:
    state = await runs.get("s2")
    return bool(state and state.live and state.pid)
