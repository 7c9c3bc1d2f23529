"""Step 5 of the simulation pipeline ("report"), and the report job of the chat.

``make_report`` is shared by the step and the report job (engine.sim.simulations). It needs a
finished run. Interviews go to the run's agents through the run service ``runs`` (the live
environment, or one reopened from the databases), with answers from the agents' personas when
the run cannot be reached or no run service is given.
"""
from __future__ import annotations

from typing import Any

from engine.db import Database
from engine.jobs import JobError
from engine.offload import run_cpu
from engine.sim import records
from engine.sim.context import SimContext
from engine.sim.report.agent import Progress, ReportResult, write_report
from engine.sim.report.sources import Interviewer, PersonaInterviewer, RunInterviewer, StoreGraph
from engine.sim.report.stats import platforms_of
from engine.sim.run.service import SimRuns


async def make_report(db: Database, config, llm, store, runs: SimRuns | None, sim_id: str, *,
                      interviewer: Interviewer | None = None, job: str | None = None, scope: str | None = None,
                      progress: Progress | None = None) -> ReportResult:
    """Write the report of simulation ``sim_id`` from its run's data and its graph ``store``."""
    sim = await records.get(db, sim_id)
    if sim is None:
        raise JobError(f"simulation {sim_id} no longer exists")
    done = await records.completed_steps(db, sim_id)
    if "run" not in done or not await run_cpu(platforms_of, sim.folder):
        raise JobError(f"simulation {sim_id} has not finished its run yet: there is nothing to report")
    if interviewer is None:
        interviewer = PersonaInterviewer(llm, sim.folder, job, scope)
        if runs is not None:
            interviewer = RunInterviewer(runs, sim_id, fallback=interviewer)
    result = await write_report(sim.folder, llm, StoreGraph(store, sim_id), interviewer, config.report,
                                requirement=sim.spec.requirement, sim_id=sim_id, job=job, scope=scope,
                                progress=progress)
    await records.record_report(db, sim_id, result.path, result.title, result.summary, len(result.sections),
                                result.tool_calls, len(result.citations), len(result.unverified))
    return result


def summary_of(result: ReportResult) -> dict[str, Any]:
    return {"report": str(result.path), "charts_dir": str(result.path.parent / "charts"), "sections": len(result.sections), "charts": len(result.charts),
            "tool_calls": result.tool_calls, "citations": len(result.citations),
            "unverified_citations": len(result.unverified)}


async def step(ctx: SimContext) -> dict[str, Any]:
    """The pipeline step."""
    result = await make_report(ctx.db, ctx.config, ctx.llm, ctx.graph, ctx.runs, ctx.sim_id, job=ctx.job_id,
                               scope=ctx.scope, progress=ctx.progress)
    return summary_of(result)
