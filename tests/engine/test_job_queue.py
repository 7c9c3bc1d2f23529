"""The shared job queue: one server or member cannot starve the others.

Queued jobs start round-robin across scopes, and within a scope across the people who queued
them, from what the shared database says (so another bot process's running jobs count); caps
bound how many jobs a scope and a person may have queued or running at once, counted in the
transaction that inserts the job. Both backends.
"""
from __future__ import annotations

import asyncio

import pytest

from engine.db import open_database
from engine.jobs import DONE, RUNNING, JobCaps, JobLimit, JobRunner
from engine.owners import ProcessOwner
from engine.words import plural
from tests.helpers.wait import until


def holding(runner: JobRunner, started: list[str]) -> dict[str, asyncio.Event]:
    """Register 'hold': each job notes its title when it starts and runs until its gate opens."""
    gates: dict[str, asyncio.Event] = {}

    async def hold(ctx):
        started.append(ctx.job.title)
        await gates.setdefault(ctx.job.title, asyncio.Event()).wait()

    runner.register("hold", hold)
    return gates


async def run_one_by_one(runner: JobRunner, gates: dict[str, asyncio.Event], started: list[str], count: int) -> None:
    """Let each started job finish in turn until ``count`` have started."""
    while len(started) < count:
        n = len(started)

        async def one_more(n: int = n) -> bool:
            return len(started) > n
        title = started[-1]
        gates.setdefault(title, asyncio.Event()).set()
        await until(one_more, 20, f"the job after {title} to start", every=0.01)


async def test_queued_jobs_start_round_robin_across_scopes_and_people(runners):
    runner = runners(max_concurrent=1)
    started: list[str] = []
    gates = holding(runner, started)
    await runner.submit("hold", {}, scope="x:0", title="blocker")

    async def blocker_runs() -> bool:
        return started == ["blocker"]
    await until(blocker_runs, 20, "the first job to start", every=0.01)
    # one server queues four jobs (three by one member), then two other servers queue theirs
    for title, scope, who in (("A1", "x:a", "ann"), ("A2", "x:a", "ann"), ("A3", "x:a", "ann"), ("A4", "x:a", "bo"),
                              ("B1", "x:b", "cy"), ("B2", "x:b", "cy"), ("C1", "x:c", "di")):
        await runner.submit("hold", {}, scope=scope, title=title, started_by=who)
    await run_one_by_one(runner, gates, started, 8)
    # a turn for each server in a round; inside x:a, bo's one job before ann's second and third
    assert started == ["blocker", "A1", "B1", "C1", "A4", "B2", "A2", "A3"]
    gates["A3"].set()
    turns = await runner.db.fetchall("SELECT title, turn FROM jobs ORDER BY turn")
    assert [r["title"] for r in turns] == started


async def test_a_scope_busy_in_another_process_waits_for_the_others(db_url):
    """Process P runs a job of server a; process Q, with one slot, holds jobs of a and b queued:
    b's goes first, because the shared database says a already has one running."""
    db_p, db_q = await open_database(db_url), await open_database(db_url)
    p = JobRunner(db_p, owner=ProcessOwner(db_p))
    q = JobRunner(db_q, max_concurrent=1, owner=ProcessOwner(db_q))
    started_p: list[str] = []
    started_q: list[str] = []
    gates_p, gates_q = holding(p, started_p), holding(q, started_q)
    try:
        await q.submit("hold", {}, scope="x:0", title="blocker")

        async def blocker_runs() -> bool:
            return started_q == ["blocker"]
        await until(blocker_runs, 20, "Q's first job", every=0.01)
        await q.submit("hold", {}, scope="x:a", title="A-in-q", started_by="ann")
        await q.submit("hold", {}, scope="x:b", title="B-in-q", started_by="bo")
        await p.submit("hold", {}, scope="x:a", title="A-in-p", started_by="cy")

        async def p_runs() -> bool:
            return started_p == ["A-in-p"]
        await until(p_runs, 20, "P's job", every=0.01)
        await run_one_by_one(q, gates_q, started_q, 2)
        assert started_q == ["blocker", "B-in-q"]   # though A-in-q was queued first
        rows = await db_q.fetchall("SELECT title, state FROM jobs WHERE state = ?", (RUNNING,))
        assert {r["title"] for r in rows} == {"A-in-p", "B-in-q"}
    finally:
        for gate in [*gates_p.values(), *gates_q.values()]:
            gate.set()
        for runner in (p, q):
            await runner.shutdown()
            await runner.owner.release()
        await db_p.close()
        await db_q.close()


async def test_a_cancelled_waiting_job_gives_no_slot_away(runners):
    runner = runners(max_concurrent=1)
    started: list[str] = []
    gates = holding(runner, started)
    await runner.submit("hold", {}, scope="x:a", title="first")
    waiting = await runner.submit("hold", {}, scope="x:b", title="second")
    third = await runner.submit("hold", {}, scope="x:c", title="third")

    async def first_runs() -> bool:
        return started == ["first"]
    await until(first_runs, 20, "the first job", every=0.01)
    assert await runner.cancel(waiting.id)
    gates.setdefault("first", asyncio.Event()).set()
    gates.setdefault("third", asyncio.Event()).set()
    assert (await runner.wait(third.id)).state == DONE
    assert started == ["first", "third"]


async def test_caps_per_scope_and_person_count_queued_and_running_jobs(runners):
    runner = runners(max_concurrent=1, caps=JobCaps(per_scope=3, per_user=2),
                     exempt=lambda scope, who: who == "owner")
    started: list[str] = []
    gates = holding(runner, started)

    async def sim(ctx):
        await gates.setdefault(ctx.job.title, asyncio.Event()).wait()
    def simulations(n: int) -> str:
        return plural(n, "{n} simulation", "{n} simulations")
    runner.register("simulation", sim, JobCaps(1, 1, simulations, ("[simulation] max_active_per_scope",
                                                                    "[simulation] max_active_per_user")))
    await runner.submit("hold", {}, scope="discord:1", title="a", started_by="7")
    await runner.submit("hold", {}, scope="discord:2", title="b", started_by="7")   # the same person elsewhere
    with pytest.raises(JobLimit) as refused:
        await runner.submit("hold", {}, scope="discord:1", title="c", started_by="7")
    assert str(refused.value) == ("you already have 2 jobs queued or running, the most one person may ([jobs] "
                                  "max_pending_per_user); wait for one to finish, or /cancel one (/jobs lists them).")
    await runner.submit("hold", {}, scope="telegram:1", title="t", started_by="7")   # another platform's person 7
    await runner.submit("hold", {}, scope="discord:1", title="d", started_by="8")
    await runner.submit("hold", {}, scope="discord:1", title="e", started_by="9")
    with pytest.raises(JobLimit, match=r"^this server or chat already has 3 jobs queued or running"):
        await runner.submit("hold", {}, scope="discord:1", title="f", started_by="10")
    await runner.submit("hold", {}, scope="discord:1", title="g", started_by="owner")   # owners have no cap
    assert await runner.db.fetchval("SELECT count(*) FROM jobs WHERE title IN ('c', 'f')") == 0
    # a kind's own caps hold besides
    await runner.submit("simulation", {}, scope="discord:3", title="s1", started_by="11")
    with pytest.raises(JobLimit, match=r"^you already have 1 simulation queued or running, the most one person "
                                       r"may \(\[simulation\] max_active_per_user\)"):
        await runner.submit("simulation", {}, scope="discord:4", title="s2", started_by="11")
    with pytest.raises(JobLimit, match=r"^this server or chat already has 1 simulation"):
        await runner.check_caps("simulation", "discord:3", "12")
    # a job that ends frees its place
    for title in ("a", "b"):
        gates.setdefault(title, asyncio.Event()).set()

    async def both_done() -> bool:
        return await runner.db.fetchval("SELECT count(*) FROM jobs WHERE title IN ('a', 'b') AND state = ?",
                                        (DONE,)) == 2
    await until(both_done, 20, "two jobs to finish", every=0.01)
    await runner.submit("hold", {}, scope="discord:2", title="h", started_by="7")
    for gate in gates.values():
        gate.set()


async def test_a_job_counts_for_its_weight_against_its_kinds_caps(runners):
    """An ensemble of N runs is one job that counts as N simulations; the caps of all jobs count it once."""
    runner = runners(max_concurrent=1, caps=JobCaps(per_scope=2, per_user=2))
    started: list[str] = []
    gates = holding(runner, started)

    async def sim(ctx):
        await gates.setdefault(ctx.job.title, asyncio.Event()).wait()
    runner.register("simulation", sim, JobCaps(5, 4, lambda n: plural(n, "{n} simulation", "{n} simulations"),
                                               ("[simulation] max_active_per_scope",
                                                "[simulation] max_active_per_user")))
    with pytest.raises(JobLimit) as refused:
        await runner.check_caps("simulation", "discord:1", "7", weight=5)
    assert str(refused.value) == ("this counts as 5 simulations and you may have at most 4 queued or running "
                                  "([simulation] max_active_per_user; 0 now): ask for fewer, or wait for one to "
                                  "finish.")
    await runner.submit("simulation", {}, scope="discord:1", title="three", started_by="7", weight=3)
    with pytest.raises(JobLimit, match=r"^this counts as 3 simulations and this server or chat may have at most 5 "
                                       r"queued or running \(\[simulation\] max_active_per_scope; 3 now\)"):
        await runner.submit("simulation", {}, scope="discord:1", title="two", started_by="8", weight=3)
    await runner.submit("simulation", {}, scope="discord:1", title="one", started_by="8", weight=2)
    with pytest.raises(JobLimit, match=r"^this server or chat already has 5 simulations queued or running"):
        await runner.submit("simulation", {}, scope="discord:1", title="more", started_by="9")
    assert await runner.db.fetchval("SELECT sum(weight) FROM jobs WHERE kind = 'simulation'") == 5
    for gate in gates.values():
        gate.set()
