import asyncio
import json

import pytest

from engine.db import open_database
from engine.jobs import CANCELLED, DONE, FAILED, INTERRUPTED, QUEUED, RUNNING, JobError, JobRunner
from engine.owners import ProcessOwner
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)
from tests.helpers.wait import until


async def start_endless_job(make_runner):
    """A runner with one job that runs until something stops it, already running."""
    runner = make_runner()
    started = asyncio.Event()

    async def forever(ctx):
        started.set()
        await asyncio.sleep(3600)

    runner.register("forever", forever)
    job = await runner.submit("forever", {}, scope="s")
    await started.wait()
    return runner, job


async def test_progress_events_reach_every_subscriber(runners):
    runner = runners()

    async def work(ctx):
        for i in range(3):
            await ctx.progress((i + 1) / 3, f"step {i + 1}")
        return {"answer": 42}

    runner.register("work", work)
    seen_a, seen_b = [], []
    runner.subscribe(lambda e: seen_a.append((e.kind, e.job.state, e.job.message)))
    runner.subscribe(lambda e: seen_b.append(e.job.progress))
    job = await runner.submit("work", {}, scope="s", title="Work")
    watched = [e.job.message async for e in runner.watch(job.id)]
    done = await runner.wait(job.id)
    assert done.state == DONE and done.result == {"answer": 42} and done.progress == 1.0
    assert ("progress", RUNNING, "step 2") in seen_a
    assert seen_a[-1][1] == DONE
    assert [p for p in seen_b if p is not None][:3] == [1 / 3, 2 / 3, 1.0]
    assert "step 3" in watched


async def test_cancel_marks_the_job_cancelled(runners):
    runner, job = await start_endless_job(runners)
    assert await runner.cancel(job.id)
    assert (await runner.get(job.id)).state == CANCELLED
    assert not await runner.cancel(job.id)  # no longer running


async def test_failures_are_recorded_with_their_message(runners):
    runner = runners()

    async def clean(ctx):
        raise JobError("the document is empty")

    async def bug(ctx):
        raise KeyError("x")

    runner.register("clean", clean)
    runner.register("bug", bug)
    a = await runner.wait((await runner.submit("clean", {}, scope="s")).id)
    b = await runner.wait((await runner.submit("bug", {}, scope="s")).id)
    assert (a.state, a.error) == (FAILED, "the document is empty")
    assert b.state == FAILED and "KeyError" in b.error


async def test_concurrency_limit_queues_the_rest(runners):
    runner = runners(max_concurrent=1)
    gate = asyncio.Event()
    running = []

    async def hold(ctx):
        running.append(ctx.id)
        await gate.wait()

    runner.register("hold", hold)
    first = await runner.submit("hold", {}, scope="s")
    second = await runner.submit("hold", {}, scope="s")
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert running == [first.id]
    assert (await runner.get(second.id)).state == QUEUED
    gate.set()
    assert (await runner.wait(second.id)).state == DONE
    assert running == [first.id, second.id]


async def test_restart_marks_running_jobs_interrupted_and_resume_uses_checkpoints(db_url):
    db = await open_database(db_url)
    runner = JobRunner(db)
    calls = []
    reached = asyncio.Event()

    async def steps(ctx):
        calls.append(dict(ctx.params))
        start = ctx.params.get("done_steps", 0)
        for step in range(start, 3):
            if step == 1 and not ctx.params.get("resumed"):
                reached.set()
                await asyncio.sleep(3600)  # the process "dies" here
            await ctx.update_params(done_steps=step + 1)
        return {"steps": ctx.params["done_steps"]}

    runner.register("steps", steps)
    job = await runner.submit("steps", {}, scope="s")
    await reached.wait()
    # a crash: the process goes away without any shutdown, leaving the row 'running' and an
    # owner that no longer renews its lease (here: its row is gone)
    runner._tasks[job.id].cancel()  # stop the coroutine, then overwrite what it saved
    await asyncio.sleep(0.05)
    await db.execute("UPDATE jobs SET state='running' WHERE id=?", (job.id,))
    await runner.owner.release()
    await db.close()

    db2 = await open_database(db_url)
    try:
        runner2 = JobRunner(db2)
        runner2.register("steps", steps)
        interrupted = await runner2.recover()
        assert [j.id for j in interrupted] == [job.id]
        assert (await runner2.get(job.id)).state == INTERRUPTED
        saved = await runner2.get(job.id)
        assert saved.params["done_steps"] == 1  # the checkpoint survived
        await db2.execute("UPDATE jobs SET params=? WHERE id=?", (json.dumps({**saved.params, "resumed": 1}), job.id))
        await runner2.resume(job.id)
        final = await runner2.wait(job.id)
        assert final.state == DONE and final.result == {"steps": 3}
        assert calls[-1]["done_steps"] == 1  # resumed from the checkpoint, not from scratch
    finally:
        await runner2.shutdown()
        await db2.close()


async def test_shutdown_interrupts_running_jobs(runners, db):
    runner, job = await start_endless_job(runners)
    await runner.shutdown()
    assert (await runner.get(job.id)).state == INTERRUPTED


async def start_progress_writer(runner: JobRunner):
    """A job on ``runner`` that writes its progress without a pause until ``go_on`` is set, then
    once more ("after"); returns it once it has written its first progress, with the event."""
    go_on, writing = asyncio.Event(), asyncio.Event()

    async def chatty(ctx):
        n = 0
        while not go_on.is_set():
            n += 1
            await ctx.progress(None, f"write {n}")
            writing.set()
            await asyncio.sleep(0.05)
        await ctx.progress(1.0, "after")
        return {"writes": n}

    runner.register("chatty", chatty)
    job = await runner.submit("chatty", {}, scope="s")
    await writing.wait()
    return job, go_on


@pytest.mark.timeout(120)
async def test_a_job_writing_progress_rides_out_a_postgresql_restart(restartable_pg):  # noqa: F811
    """Its writes wait for the database while the server is down (4 s), and the job goes on to
    'done' instead of failing on the pool's connection error."""
    db = await open_database(await restartable_pg.fresh_database())
    runner = JobRunner(db)
    try:
        job, go_on = await start_progress_writer(runner)
        restarting = await restartable_pg.going_down(4.0)
        await restarting
        assert job.id in runner._tasks, "the job ended during the outage"
        go_on.set()
        final = await runner.wait(job.id)
        assert (final.state, final.message, final.error) == (DONE, "after", None)
    finally:
        await runner.shutdown()
        await db.close()


@pytest.mark.timeout(120)
async def test_a_job_whose_database_stays_away_past_the_lease_ends_interrupted(restartable_pg):  # noqa: F811
    """An outage longer than the process's lease: the job's write gives up and the job ends
    'interrupted', not 'failed'; that end is saved once the database is back, and it resumes."""
    db = await open_database(await restartable_pg.fresh_database())
    runner = JobRunner(db, owner=ProcessOwner(db, lease_s=1.5))
    try:
        job, go_on = await start_progress_writer(runner)
        restarting = await restartable_pg.going_down(8.0)
        await until(lambda: job.id in runner._unsaved, 30, "the job to end, unsaved, during the outage")
        await restarting

        async def ended():
            stored = await runner.get(job.id)
            return stored if stored.finished else None
        saved = await until(ended, 30, "its end to be saved once the database is back")
        assert (saved.state, saved.error) == (INTERRUPTED, None) and saved.resumable
        assert "database" in saved.message
        go_on.set()
        await runner.resume(job.id)
        assert (await runner.wait(job.id)).state == DONE
    finally:
        await runner.shutdown()
        await db.close()
