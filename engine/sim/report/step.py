"""Step 5 for the pipeline and for the chat's report job.

``step`` is the pipeline step; it belongs in ``engine.sim.pipeline.STEPS`` right after the run
step, as ``("report", report_step.step)``. ``make_report`` is shared with the report job.
"""
from __future__ import annotations

from typing import Any

from engine.db import Database
from engine.jobs import JobError
from engine.offload import run_cpu
from engine.sim import pipeline
from engine.sim.report.agent import Progress, ReportResult, write_report
from engine.sim.report.sources import Interviewer, PersonaInterviewer, StoreGraph
from engine.sim.report.stats import platforms_of


async def make_report(db: Database, config, llm, store, sim_id: str, *, interviewer: Interviewer | None = None,
                      job: str | None = None, scope: str | None = None,
                      progress: Progress | None = None) -> ReportResult:
    """Write the report of simulation ``sim_id`` from its run's data and its graph ``store``."""
    loaded = await pipeline.load_simulation(db, sim_id)
    if loaded is None:
        raise JobError(f"simulation {sim_id} no longer exists")
    spec, folder, _, _ = loaded
    steps = [name for name, _ in pipeline.STEPS]
    done = await pipeline.completed_steps(db, sim_id)
    if "run" in steps and "run" not in done or not await run_cpu(platforms_of, folder):
        raise JobError(f"simulation {sim_id} has not finished its run yet: there is nothing to report")
    return await write_report(folder, llm, StoreGraph(store, sim_id),
                              interviewer or PersonaInterviewer(llm, folder, job, scope), config.report,
                              requirement=spec.requirement, sim_id=sim_id, job=job, scope=scope, progress=progress)


def summary_of(result: ReportResult) -> dict[str, Any]:
    return {"report": str(result.path), "charts_dir": str(result.path.parent / "charts"), "sections": len(result.sections), "charts": len(result.charts),
            "tool_calls": result.tool_calls, "citations": len(result.citations),
            "unverified_citations": len(result.unverified)}


async def step(ctx) -> dict[str, Any]:
    """The pipeline step (ctx: pipeline.SimContext)."""
    result = await make_report(ctx.db, ctx.config, ctx.llm, ctx.graph, ctx.sim_id, job=ctx.job_id,
                               scope=ctx.scope, progress=ctx.progress)
    return summary_of(result)
