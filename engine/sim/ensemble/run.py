"""Step 4 of an ensemble: its N runs, ``parallel_runs`` at a time.

Each run goes through the process's run service (``SimRuns.run``) exactly as a one-run simulation
does, so it resumes after a crash from its last round, stops at a budget cap, and is followed by
the round observers (stances, memory). Every run's LLM usage counts for the head's job and scope:
one job, one budget, the caps counted for all N. A run that finishes records its own ``run`` step
(what it spent: its agents' requests), so a resumed step 4 starts only the runs not finished. The
job's progress shows every run on a line of its own, and ``/sim status`` reads each run's row.

How many run at once (``parallel_runs``): ``[simulation] parallel_runs``; 0 derives it from the
machine (half its CPUs, at least one); with the Ray executor, every run at once, each its own
actor placed by Ray. When some runs fail the step fails, naming them; the runs that finished stay
finished and /resume continues the others.
"""
from __future__ import annotations

import asyncio
import os

from engine.config import Config
from engine.i18n import _
from engine.jobs import JobError, JobStopped, state_name
from engine.llm.errors import BudgetExceeded
from engine.sim import records
from engine.sim.context import SimContext
from engine.sim.ensemble.members import prepare
from engine.sim.records import SimRecord
from engine.sim.run.service import run_summary
from engine.words import plural


def parallel_runs(config: Config, runs: int) -> int:
    """How many of ``runs`` runs go at once."""
    s = config.simulation
    if s.parallel_runs:
        width = s.parallel_runs
    elif s.executor == "ray":
        width = runs
    else:
        width = max(1, (os.cpu_count() or 2) // 2)
    return max(1, min(width, runs))


def _line(k: int, data: dict | None, state: str) -> str:
    if data is None or state != "running":
        return _("run {run}: {state}", run=k, state=_("waiting") if state == "waiting" else state_name(state))
    done = data.get("rounds_done") or {}
    rounds = min(done.values()) if done else 0
    return _("run {run}: round {round}/{total} · {actions}", run=k, round=rounds, total=data.get("rounds_total") or "?",
             actions=plural(sum((data.get("actions") or {}).values()), "{n} action", "{n} actions"))


async def run_all(ctx: SimContext, runs: int) -> dict:
    """Run (or resume) every run of the ensemble ``ctx.sim_id``; its step-4 summary."""
    service = ctx.runs
    if service is None:
        raise JobError(_("simulation runs are not enabled in this process"))
    head = await records.get(ctx.db, ctx.sim_id)
    if head is None:
        raise JobError(_("simulation {sim} no longer exists", sim=ctx.sim_id))
    members = await prepare(ctx.db, ctx.config, head, runs)
    width = parallel_runs(ctx.config, len(members))
    await ctx.progress(0.0, _("{runs}, {width} at a time", runs=plural(len(members), "{n} run", "{n} runs"),
                              width=width))
    slots = asyncio.Semaphore(width)
    states = {m.run: "waiting" for m in members}
    fractions = {m.run: 0.0 for m in members}
    data: dict[int, dict] = {}

    async def publish() -> None:
        lines = [_line(k, data.get(k), states[k]) for k in sorted(states)]
        await ctx.progress(sum(fractions.values()) / len(fractions), "\n".join(lines))

    async def one(member: SimRecord) -> dict:
        k = member.run
        done = await records.completed_steps(ctx.db, member.id)
        if "run" in done:
            states[k], fractions[k] = "done", 1.0
            return done["run"]["summary"]
        async with slots:
            states[k] = "running"

            async def progress(fraction, message, **values) -> None:
                fractions[k] = fraction or 0.0
                data[k] = values
                await publish()

            try:
                result = await service.run(member.id, member.folder, progress, job_id=ctx.job_id, scope=ctx.scope)
            except BaseException as err:
                states[k] = "stopped" if isinstance(err, (JobStopped, BudgetExceeded)) else "failed"
                raise
        summary = run_summary(result)
        calls, tokens = await service.usage.spent(member.id) if service.usage is not None else (0, 0)
        await records.record_step(ctx.db, member.id, "run", summary, calls, tokens)
        states[k], fractions[k] = "done", 1.0
        await publish()
        return summary

    results = await asyncio.gather(*(one(m) for m in members), return_exceptions=True)
    failed = {m.run: r for m, r in zip(members, results) if isinstance(r, BaseException)}
    if failed:
        _raise_for(failed, len(members))
    summaries = [r for r in results if isinstance(r, dict)]
    return {"runs": len(members), "rounds": max((s.get("rounds", 0) for s in summaries), default=0),
            "actions": sum(s.get("actions", 0) for s in summaries),
            "actions per run": " ".join(str(s.get("actions", 0)) for s in summaries)}


def _raise_for(failed: dict[int, BaseException], total: int) -> None:
    """One error for the runs that did not finish: a budget cap first, then a stop, else a failure."""
    which = ", ".join(str(k) for k in sorted(failed))
    runs = _("run {which}", which=which) if len(failed) == 1 else _("runs {which}", which=which)
    kept = ("" if len(failed) == total else plural(
        total - len(failed), " (the {n} run that finished is kept)", " (the {n} runs that finished are kept)"))
    for kind in (BudgetExceeded, JobStopped):
        stopped = next((e for e in failed.values() if isinstance(e, kind)), None)
        if stopped is not None:
            raise kind(plural(len(failed), "{runs} of {total} stopped{kept}: {error}",
                              "{runs} of {total} stopped{kept}: {error}",
                              runs=runs, total=total, kept=kept, error=stopped))
    first = next(iter(failed.values()))
    if not isinstance(first, Exception):
        raise first
    # The verb agrees with the runs that failed (Portuguese: "não terminou" / "não terminaram").
    raise JobError(plural(len(failed), "{runs} of {total} did not finish{kept}: {error}",
                          "{runs} of {total} did not finish{kept}: {error}",
                          runs=runs, total=total, kept=kept, error=first))
