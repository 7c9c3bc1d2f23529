"""Processes sharing one database: who owns a job or a run, when that owner counts as gone,
and what another process may (and may not) do with its work.

Each "process" here is its own database connection and its own ProcessOwner; a real other
process stands in wherever a pid has to be alive or dead. The tests with separate bot
processes are tests/processes/test_coexist.py (SQLite) and tests/processes/test_pg_processes.py (PostgreSQL)."""
from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from engine import claims
from engine.db import open_database
from engine.jobs import INTERRUPTED, RUNNING, JobError, JobRunner
from engine.owners import Identity, ProcessOwner, process_start
from engine.sim.run.executor import LocalExecutor
from engine.sim.run.service import LLMTarget, SimRuns
from tests.helpers.sim import make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(60)
HOST = socket.gethostname()
LONG = 3600.0  # a lease no heartbeat renews during a test: only the test moves it


@pytest.fixture
async def two_dbs(db_url):
    """Two processes' connections to one database, on each backend in turn."""
    first, second = await open_database(db_url), await open_database(db_url)
    yield first, second
    await first.close()
    await second.close()


async def registered(db, identity: Identity, lease_s: float = LONG) -> ProcessOwner:
    owner = ProcessOwner(db, lease_s, identity)
    await owner.start()
    return owner


async def expire(db, owner: ProcessOwner) -> None:
    """The owner stopped renewing (stalled, or on a host that went away) and its lease ran out."""
    await db.execute("UPDATE owners SET lease_until = 0 WHERE id = ?", (owner.id,))


async def ticking_in(runner_a: JobRunner, runner_b: JobRunner, ticks_a: asyncio.Queue):
    """A 'ticking' job started by process A, once process B reads its first tick."""
    job = await runner_a.submit("ticking", {}, scope="s")
    ticks_a.put_nowait(1)
    async with asyncio.timeout(10):
        while (seen := await runner_b.get(job.id)) is None or seen.message != "tick 1":
            await asyncio.sleep(0.02)
    return job


async def test_an_owner_is_gone_once_its_lease_expires_or_its_process_ended(db):
    me = await registered(db, Identity.of_this_process())
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        other = await registered(db, Identity(HOST, sleeper.pid, process_start(sleeper.pid), "live"))
        assert not await me.gone(other.id)
        assert "pid %d on %s" % (sleeper.pid, HOST) in await me.describe(other.id)
        # the pid alive, but no longer the process start that registered
        reused = await registered(db, Identity(HOST, sleeper.pid, "1", "reused"))
        assert await me.gone(reused.id)
        # alive but its lease ran out
        await expire(db, other)
        assert await me.gone(other.id)
        await other.renew()
        assert not await me.gone(other.id)
        sleeper.kill()
        sleeper.wait()
        assert await me.gone(other.id)  # lease still valid, its pid has ended
    finally:
        sleeper.kill()
        sleeper.wait()
    # on another host the pid says nothing: the lease alone decides
    far = await registered(db, Identity("far-away-host", 1, "", "far"))
    assert not await me.gone(far.id)
    await expire(db, far)
    assert await me.gone(far.id)
    # no row: released at a clean shutdown, or work recorded before owners existed
    assert await me.gone("nobody:1:x") and await me.gone(None)
    await me.release()
    assert await far.gone(me.id)
    for owner in (other, reused, far):
        await owner.release()


async def test_a_zombie_pid_counts_as_ended(db):
    me = await registered(db, Identity.of_this_process())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = await registered(db, Identity(HOST, child.pid, process_start(child.pid), "z"))
    try:
        async with asyncio.timeout(20):
            while process_start(child.pid):  # exited but not yet reaped: a zombie
                await asyncio.sleep(0.02)
        assert await me.gone(owner.id)
    finally:
        child.wait()
        await owner.release()
        await me.release()


def ticking_job(ticks: asyncio.Queue):
    """A job that reports progress on every tick and never ends by itself."""
    async def job(ctx):
        while True:
            await ctx.progress(None, f"tick {await ticks.get()}")
    return job


async def test_a_live_owners_job_is_left_alone_then_taken_over_once_it_is_gone(two_dbs):
    db_a, db_b = two_dbs
    owner_a, owner_b = ProcessOwner(db_a, LONG), ProcessOwner(db_b, LONG)  # B's heartbeat sweeps nothing here
    runner_a, runner_b = JobRunner(db_a, owner=owner_a), JobRunner(db_b, owner=owner_b)
    ticks_a, ticks_b = asyncio.Queue(), asyncio.Queue()  # what each process's job sees
    runner_a.register("ticking", ticking_job(ticks_a))
    runner_b.register("ticking", ticking_job(ticks_b))
    seen_by_a = []
    runner_a.subscribe(lambda e: seen_by_a.append((e.job.state, e.job.message)))
    job = await ticking_in(runner_a, runner_b, ticks_a)

    # B starts while A runs the job: nothing is recovered, B lists it as running
    assert await runner_b.recover() == []
    assert [(j.id, j.state) for j in await runner_b.list()] == [(job.id, RUNNING)]
    with pytest.raises(JobError, match=r"is running in another bot process \(pid \d+ on .+\); it cannot be resumed"):
        await runner_b.resume(job.id)
    with pytest.raises(JobError, match="runs in another bot process .*; cancel it there"):
        await runner_b.cancel(job.id)
    assert (await runner_b.get(job.id)).state == RUNNING

    # A stalls past its lease: B takes the job over as interrupted, and A's late write is fenced off
    await expire(db_b, owner_a)
    [taken] = await runner_b.recover()
    assert (taken.id, taken.state, taken.owner) == (job.id, INTERRUPTED, runner_b.owner.id)
    ticks_a.put_nowait(2)
    # A stops the job once its next write is fenced off, and says why (an event after its task ends)
    await until(lambda: seen_by_a[-1] == (INTERRUPTED, "taken over by another bot process"), 10,
                "A to report the job taken over")
    assert job.id not in runner_a._tasks
    row = await runner_b.get(job.id)
    assert (row.state, row.message, row.owner) == (INTERRUPTED, "interrupted by a restart", runner_b.owner.id)

    # B resumes it; A may not, now that B runs it
    await runner_b.resume(job.id)
    ticks_b.put_nowait(3)
    async with asyncio.timeout(10):
        while (await runner_a.get(job.id)).message != "tick 3":
            await asyncio.sleep(0.02)
    await owner_a.renew()  # A is back: B's job stays B's
    with pytest.raises(JobError, match="cannot be resumed"):
        await runner_a.resume(job.id)
    await runner_b.shutdown()
    await runner_a.shutdown()
    await owner_a.release()
    await owner_b.release()
    assert (await runner_b.get(job.id)).state == INTERRUPTED


async def test_a_live_process_takes_over_the_jobs_of_one_whose_lease_expired(two_dbs):
    db_a, db_b = two_dbs
    owner_a = ProcessOwner(db_a, LONG)
    runner_a = JobRunner(db_a, owner=owner_a)
    runner_b = JobRunner(db_b, owner=ProcessOwner(db_b, lease_s=0.3))  # its heartbeat sweeps every 0.1 s
    ticks_a = asyncio.Queue()
    for runner in (runner_a, runner_b):
        runner.register("ticking", ticking_job(ticks_a))
    taken = asyncio.get_running_loop().create_future()
    runner_b.subscribe(lambda e: e.data.get("taken_over") and not taken.done() and taken.set_result(e.job))
    job = await ticking_in(runner_a, runner_b, ticks_a)
    assert await runner_b.recover() == []            # A renews: its job is left alone
    assert await runner_b.take_over_expired() == []

    await expire(db_b, owner_a)                      # A stops renewing: B's next heartbeat takes the job
    async with asyncio.timeout(10):
        seen = await taken
    assert (seen.id, seen.state, seen.owner) == (job.id, INTERRUPTED, runner_b.owner.id)
    row = await runner_b.get(job.id)
    assert (row.state, row.owner, row.resumable) == (INTERRUPTED, runner_b.owner.id, True)
    assert row.message == "interrupted: the bot process that ran it stopped"
    ticks_a.put_nowait(2)                            # A's late progress write is fenced off
    async with asyncio.timeout(10):
        while job.id in runner_a._tasks:
            await asyncio.sleep(0.02)
    assert (await runner_b.get(job.id)).owner == runner_b.owner.id
    await runner_b.shutdown()
    await runner_a.shutdown()
    await owner_a.release()
    await runner_b.owner.release()


async def test_a_named_claim_is_held_by_one_live_process_and_taken_over_once_it_is_gone(two_dbs):
    db_a, db_b = two_dbs
    owner_a = await registered(db_a, Identity("host-a", 1, "", "a"))
    owner_b = await registered(db_b, Identity("host-b", 2, "", "b"))

    def holder(owner: ProcessOwner) -> str:
        return f"another bot process (pid {owner.identity.pid} on {owner.identity.host})"
    first = await asyncio.gather(claims.claim(db_a, owner_a, "poll"), claims.claim(db_b, owner_b, "poll"))
    assert first in ([None, holder(owner_a)], [holder(owner_b), None]), first  # exactly one holds it
    winner, loser = (owner_a, owner_b) if first[0] is None else (owner_b, owner_a)
    assert await claims.claim(loser.db, loser, "poll") == holder(winner)
    await expire(loser.db, winner)
    assert await claims.claim(loser.db, loser, "poll") is None           # its lease ran out: taken over
    assert await claims.claim(winner.db, winner, "poll") == holder(loser)  # not given back when it returns
    await claims.release(loser.db, loser, "poll")
    assert await claims.claim(winner.db, winner, "poll") is None
    for owner in (owner_a, owner_b):
        await owner.release()


async def test_a_running_job_whose_process_is_gone_can_be_resumed_without_a_restart(two_dbs):
    db_a, db_b = two_dbs
    owner_a = ProcessOwner(db_a, LONG)
    runner_a, runner_b = JobRunner(db_a, owner=owner_a), JobRunner(db_b)
    ticks_a, ticks_b = asyncio.Queue(), asyncio.Queue()  # what each process's job sees
    runner_a.register("ticking", ticking_job(ticks_a))
    runner_b.register("ticking", ticking_job(ticks_b))
    job = await ticking_in(runner_a, runner_b, ticks_a)
    assert await runner_b.recover() == []  # B started while A was alive
    await expire(db_b, owner_a)            # then A stopped renewing
    resumed = await runner_b.resume(job.id)
    assert resumed.owner == runner_b.owner.id
    ticks_b.put_nowait(2)
    async with asyncio.timeout(10):
        while (await runner_b.get(job.id)).message != "tick 2":
            await asyncio.sleep(0.02)
    assert (await runner_b.get(job.id)).state == RUNNING
    await runner_b.shutdown()
    await runner_a.shutdown()  # A's own copy ends too, without overwriting B's record
    await owner_a.release()
    assert (await runner_b.get(job.id)).owner == runner_b.owner.id


async def test_two_processes_resuming_the_same_job_at_once_run_it_once(two_dbs):
    db_a, db_b = two_dbs
    runner_a, runner_b = JobRunner(db_a), JobRunner(db_b)
    ticks_a, ticks_b = asyncio.Queue(), asyncio.Queue()  # what each process's job sees
    runner_a.register("ticking", ticking_job(ticks_a))
    runner_b.register("ticking", ticking_job(ticks_b))
    job = await ticking_in(runner_a, runner_b, ticks_a)
    await runner_a.shutdown()
    assert (await runner_b.get(job.id)).state == INTERRUPTED
    outcomes = await asyncio.gather(runner_a.resume(job.id), runner_b.resume(job.id), return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], JobError), outcomes
    assert len(runner_a._tasks) + len(runner_b._tasks) == 1
    await runner_a.shutdown()
    await runner_b.shutdown()


async def test_another_live_process_run_is_never_touched_nor_run_alongside(tmp_path, db):
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=2, rounds=2, sim_id="s1")
    other = await registered(db, Identity.of_this_process())  # the bot process that runs s1
    await db.execute(
        "INSERT INTO sim_runs(sim_id, folder, status, rounds_total, started_at, updated_at, owner)"
        " VALUES ('s1', ?, 'running', 2, 'now', 'now', ?)", (str(folder), other.id))
    runs = SimRuns(db, LocalExecutor(), LLMTarget("http://127.0.0.1:9/v1", "fake-model"))
    assert await runs.recover() == []
    assert "another bot process" in await runs.elsewhere("s1")

    async def progress(*_args, **_data):
        pass
    with pytest.raises(JobError, match="is running in another bot process .*cannot run here at the same time"):
        await runs.run("s1", folder, progress)
    with pytest.raises(JobError, match="is running in another bot process .*interview its agents there"):
        await runs.interview("s1", None, "What now?")
    assert (await runs.get("s1")).status == "running"

    await other.release()  # its process is gone
    assert await runs.elsewhere("s1") is None
    assert await runs.recover() == ["s1"]
    assert (await runs.get("s1")).status == "interrupted"
    await runs.close()


async def test_a_finished_run_left_idle_by_a_gone_process_is_completed_not_interrupted(tmp_path, db):
    # `python -m bot simulate` ends while its finished run idles for interviews: the next process
    # to start must not call that run interrupted.
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=2, rounds=2, sim_id="s1")
    other = await registered(db, Identity.of_this_process())
    await db.execute(
        "INSERT INTO sim_runs(sim_id, folder, status, rounds_total, started_at, updated_at, owner)"
        " VALUES ('s1', ?, 'idle', 2, 'now', 'now', ?)", (str(folder), other.id))
    await other.release()
    runs = SimRuns(db, LocalExecutor(), LLMTarget("http://127.0.0.1:9/v1", "fake-model"))
    assert await runs.recover() == []
    assert (await runs.get("s1")).status == "completed"
    await runs.close()
