"""LLM budgets during step 4: a cap reached mid-run stops it at the end of that round, every call
of the run and of its interviews is recorded once, also across a kill -9 of the child and a
resume. The real child process, camel-oasis and the openai client run against the fake server
(each child start imports oasis, torch and transformers: each test reuses its runs)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import pytest

from bot.adapters.console import Console
from bot.app import App
from engine.config import LLMSection, load_config
from engine.llm.usage import UsageLedger
from engine.sim import pipeline
from engine.sim.run.accounting import RunUsage
from engine.sim.run.executor import REPO_ROOT, LocalExecutor, child_pid_alive
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from engine.sim.run.usage_log import USAGE_LOG, read_totals
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.helpers.llm_fixtures import fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import jobs_for, log_events, make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(300)
TOKENS_PER_CALL = 15  # the fake's completion(): 10 prompt + 5 completion tokens
CALLS_PER_ROUND = 7 + 5  # make_sim_folder: Twitter 6 agents (one twice), Reddit 4 agents (one twice)


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI(SocialResponder()) as server:
        yield server


def service(db, llm, ledger: UsageLedger, **settings) -> SimRuns:
    opts: dict[str, Any] = dict(idle_s=60.0, progress_interval_s=0.2, stop_timeout_s=60.0)
    opts.update(settings)
    return SimRuns(db, LocalExecutor(kill_grace=3.0), LLMTarget(llm.base_url, "fake-model"), RunSettings(**opts),
                   usage=RunUsage(db, ledger, "fake-model"))


async def recorded_calls(db, job: str) -> int:
    return await db.fetchval("SELECT coalesce(sum(calls), 0) FROM llm_usage WHERE job = ?", (job,))


async def test_a_cap_stops_the_run_at_the_end_of_its_round_and_interviews_count(tmp_path, db, llm):
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=6, rounds=4, sim_id="b1")
    responder = llm.responder = SocialResponder()
    cap = CALLS_PER_ROUND * TOKENS_PER_CALL + TOKENS_PER_CALL  # reached in the second round
    ledger = UsageLedger(LLMSection(base_url=llm.base_url, model="fake-model", job_budget_tokens=cap), db)
    runs = service(db, llm, ledger, idle_s=60.0)
    jobs = jobs_for(db, runs)
    job = await jobs.submit("sim_run", {"sim_id": "b1", "folder": str(folder)}, scope="console:local")

    # 1. the run stops once the cap is reached, at the end of the rounds then under way
    stopped = await jobs.wait(job.id)
    used = await ledger.for_job(job.id)
    assert stopped.state == "failed"
    assert f"({used.tokens} of {cap} tokens)" in stopped.error and "raise llm.job_budget_tokens" in stopped.error
    assert "stopped after round" in stopped.error and "/sim resume b1" in stopped.error
    state = await runs.get("b1")
    assert state.status == "stopped" and all(0 < done < 4 for done in state.rounds_done.values())
    lines = [json.loads(line) for line in (folder / USAGE_LOG).read_text().splitlines()]
    reached_at = next(e["ts"] for e in lines if e["prompt_tokens"] + e["completion_tokens"] >= cap)
    for platform, done in state.rounds_done.items():
        events = log_events(folder, platform)
        assert [e["round"] for e in events if e["type"] == "round_end"] == list(range(done))  # whole rounds
        assert max(e["ts"] for e in events if e["type"] == "round_start") < reached_at  # none began after
    # every call the fake served is recorded once, against the job and its scope
    assert used.calls == responder.served == await recorded_calls(db, job.id)
    assert used.tokens == TOKENS_PER_CALL * used.calls and used.tokens < cap + CALLS_PER_ROUND * TOKENS_PER_CALL
    assert await db.fetchval("SELECT sum(calls) FROM llm_usage WHERE scope = 'console:local'") == used.calls

    # 2. a resume while the cap still holds is refused at once, without starting the run
    await jobs.resume(job.id)
    refused = await jobs.wait(job.id)
    assert "cannot run on" in refused.error and "llm.job_budget_tokens" in refused.error
    assert responder.served == used.calls and (await runs.get("b1")).status == "stopped"

    # 3. with the cap raised the run resumes and ends; interviews after it count too
    ledger.config.job_budget_tokens = 10 * cap
    await jobs.resume(job.id)
    done = await jobs.wait(job.id)
    assert done.state == "done", done.error
    answers = await runs.interview("b1", [1, 2], "Was the toll fair?", ["reddit"])
    assert [a.agent_id for a in answers] == [1, 2] and all(a.answer for a in answers)
    assert (await ledger.for_job(job.id)).calls == responder.served == await recorded_calls(db, job.id)
    assert await runs.release("b1")
    await until(lambda: _status(runs, "b1", "completed"), 120)
    assert (await ledger.for_job(job.id)).calls == responder.served == await recorded_calls(db, job.id)
    assert len(read_totals(folder)) == 2 and not responder.rejected  # two child processes
    await jobs.shutdown()
    await runs.close()


async def test_the_channel_is_told_which_cap_stopped_the_run_and_resumes_it_once_raised(
        openai_server, tmp_path, capsys):  # noqa: F811
    openai_server.responder = responder = SocialResponder()
    cap = CALLS_PER_ROUND * TOKENS_PER_CALL + TOKENS_PER_CALL
    path = tmp_path / "config.toml"
    path.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{openai_server.base_url}"\n'
                    f'job_budget_tokens = {cap}\n[jobs]\nprogress_interval_s = 0.0\n[simulation]\nrun_idle_s = 0.5\n'
                    'track_stances = false\n')  # the cap counts the agents' steps alone
    # (tests/engine/sim/stance/test_tracking.py: stances)
    app = await App.create(load_config(path), ["bot.features.core", "bot.features.simulation"])
    app.sims.steps = pipeline.STEPS[:4]  # the job ends with the run
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        folder = tmp_path / "sim"
        make_sim_folder(folder, agents=6, rounds=3, sim_id="c2")
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('c2', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "toll?"}), str(folder)))
        for step in ("ontology", "graph", "environment"):  # done: the pipeline goes straight to the run
            await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('c2', ?, 'x')", (step,))
        job = await app.jobs.submit("simulation", {"sim_id": "c2"}, "console:local", channel="console")
        stopped = await app.jobs.wait(job.id)
        said: list[str] = []

        async def told() -> bool:  # the job's final note follows its end
            said.append(capsys.readouterr().out)
            return "❌" in "".join(said)
        await until(told, 120)
        out = "".join(said)
        used = await app.llm.job_usage(job.id)
        assert stopped.state == "failed" and "simulation c2 stopped after round" in out
        assert f"this job reached its LLM budget ({used.tokens} of {cap} tokens)" in out
        assert "raise llm.job_budget_tokens" in out and "/sim resume c2" in out
        assert used.calls == responder.served

        app.config.llm.job_budget_tokens = 0  # no cap any more
        await console.handle_line("/sim resume c2")
        finished = await app.jobs.wait(job.id)
        assert finished.state == "done", finished.error
        assert finished.result["llm_calls"] == responder.served == 3 * CALLS_PER_ROUND
    finally:
        await app.close()


@sqlite_only
async def test_usage_is_recorded_once_across_a_kill_and_a_resume(tmp_path, db, llm):
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=6, rounds=3, sim_id="b2")
    responder = llm.responder = SocialResponder(hold_after=CALLS_PER_ROUND + 5)
    ledger = UsageLedger(LLMSection(base_url=llm.base_url, model="fake-model"), db)
    runs = first_runs = service(db, llm, ledger, idle_s=0.5)
    jobs = first_jobs = jobs_for(db, runs)
    job = await jobs.submit("sim_run", {"sim_id": "b2", "folder": str(folder)}, scope="console:local")

    async def all_answers_logged() -> bool:
        logged = sum(t["calls"] for t in read_totals(folder).values())
        return responder.held > 0 and logged == responder.served

    # 1. kill -9 of the child while the fake holds its next requests: what it logged is recorded
    await until(all_answers_logged, 120)
    os.kill((await runs.get("b2")).pid, signal.SIGKILL)
    crashed = await jobs.wait(job.id)
    assert "killed by signal 9" in crashed.error
    assert await recorded_calls(db, job.id) == responder.served == CALLS_PER_ROUND + 5

    # 2. a restart (new ledger and run service over the same database) and a resume to the end:
    #    the first process's calls are reconciled again at start-up and at the resume, never twice
    responder.hold_after = None
    ledger = UsageLedger(LLMSection(base_url=llm.base_url, model="fake-model"), db)
    runs = service(db, llm, ledger, idle_s=0.5)
    jobs = jobs_for(db, runs)
    await jobs.recover()
    await runs.recover()
    await jobs.resume(job.id)
    finished = await jobs.wait(job.id)
    assert finished.state == "done", finished.error
    await until(lambda: _status(runs, "b2", "completed"), 120)
    assert await recorded_calls(db, job.id) == responder.served == (await ledger.for_job(job.id)).calls
    processes = await db.fetchall("SELECT calls FROM sim_run_usage WHERE sim_id = 'b2'")
    assert sorted(r["calls"] for r in processes) == sorted(t["calls"] for t in read_totals(folder).values())
    assert len(processes) == 2 and not responder.rejected
    for jobs_, runs_ in ((jobs, runs), (first_jobs, first_runs)):  # the first "process" too
        await jobs_.shutdown()
        await runs_.close()


@sqlite_only
async def test_what_an_orphaned_run_spent_after_a_kill_of_the_bot_is_recorded(tmp_path, db, llm):
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=6, rounds=3, sim_id="b3")
    responder = llm.responder = SocialResponder(delay=0.3)  # rounds long enough to kill the bot in one
    bot = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.helpers.sim_parent", str(db.path),
                                               str(folder), llm.base_url, "b3", stdout=asyncio.subprocess.PIPE,
                                               cwd=REPO_ROOT)
    job_id = (await asyncio.wait_for(bot.stdout.readline(), 60)).decode().strip()

    async def calls_logged(at_least: int) -> bool:
        return sum(t["calls"] for t in read_totals(folder).values()) >= at_least

    # 1. the bot dies by kill -9 mid-round; its orphaned run ends that round on its own
    await until(lambda: calls_logged(CALLS_PER_ROUND + 1), 120)
    bot.kill()
    await bot.wait()
    pid = await db.fetchval("SELECT pid FROM sim_runs WHERE sim_id = 'b3'")

    async def orphan_gone() -> bool:
        return not child_pid_alive(pid, folder)
    await until(orphan_gone, 120)

    # 2. the next bot process records at start-up what the dead one could not, then resumes
    ledger = UsageLedger(LLMSection(base_url=llm.base_url, model="fake-model"), db)
    runs = service(db, llm, ledger, idle_s=0.5)
    jobs = jobs_for(db, runs)
    await jobs.recover()
    await runs.recover()
    assert await recorded_calls(db, job_id) == responder.served
    await jobs.resume(job_id)
    finished = await jobs.wait(job_id)
    assert finished.state == "done", finished.error
    await until(lambda: _status(runs, "b3", "completed"), 120)
    assert await recorded_calls(db, job_id) == responder.served == (await ledger.for_job(job_id)).calls
    assert not responder.rejected
    await jobs.shutdown()
    await runs.close()


async def test_reconciling_a_usage_log_adds_only_what_is_new(tmp_path, db):
    """Cumulative lines per process, a line torn by a kill, a report older than one recorded."""
    ledger = UsageLedger(LLMSection(base_url="http://127.0.0.1:9/v1", model="m"), db)
    usage = RunUsage(db, ledger, "m")
    await db.execute("INSERT INTO sim_runs(sim_id, folder, job_id, scope, status, started_at, updated_at)"
                     " VALUES ('r1', ?, 'j1', 's1', 'running', 'x', 'x')", (str(tmp_path),))
    lines = [{"process": "a", "calls": 1, "prompt_tokens": 10, "completion_tokens": 5},
             {"process": "a", "calls": 2, "prompt_tokens": 20, "completion_tokens": 10},
             {"process": "b", "calls": 1, "prompt_tokens": 7, "completion_tokens": 3}]
    (tmp_path / USAGE_LOG).write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"process": "b", "ca')
    await usage.saw("r1", {"process": "a", "calls": 1, "prompt_tokens": 10, "completion_tokens": 5})  # an event
    await usage.reconcile("r1", tmp_path)
    await usage.reconcile("r1", tmp_path)
    await usage.saw("r1", {"process": "a", "calls": 1, "prompt_tokens": 10, "completion_tokens": 5})  # late
    for totals in (await ledger.for_job("j1"), await UsageLedger(ledger.config, db).for_job("j1")):
        assert (totals.calls, totals.prompt_tokens, totals.completion_tokens) == (3, 27, 13)
    assert await db.fetchval("SELECT sum(calls) FROM llm_usage WHERE scope = 's1'") == 3


async def _status(runs, sim_id: str, status: str) -> bool:
    state = await runs.get(sim_id)
    return state is not None and state.status == status
