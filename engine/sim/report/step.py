"""Step 5 of the simulation pipeline ("report"), and the report job of the chat.

``register()`` adds the step after the run step (once per process); ``make_report`` is shared
by the step and the chat's report job. Every report has the beliefs per round (chart, replay
GIF) and the run's quality diagnostics (engine.sim.report.diagnostics). Interviews go to the run's agents through the run
service (the live environment, or one reopened from the databases), with answers from the
agents' personas when the run cannot be reached.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.db import Database
from engine.jobs import JobError, utcnow
from engine.offload import run_cpu
from engine.sim import pipeline
from engine.sim.report import diagnostics
from engine.sim.report.agent import Progress, ReportResult, write_report
from engine.sim.report.charts import CHARTS_DIR
from engine.sim.report.sources import Interviewer, PersonaInterviewer, RunInterviewer, StoreGraph
from engine.sim.run.step import runs_for
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
    if interviewer is None:
        interviewer = PersonaInterviewer(llm, folder, job, scope)
        if "run" in done:
            interviewer = RunInterviewer(runs_for(db, config, ledger=llm.usage, llm=llm), sim_id, fallback=interviewer)
    beliefs, quality = await diagnostics.report_section(db, sim_id, folder, Path(folder) / CHARTS_DIR)
    result = await write_report(folder, llm, StoreGraph(store, sim_id), interviewer, config.report,
                                requirement=spec.requirement, sim_id=sim_id, job=job, scope=scope, progress=progress,
                                extra_charts=beliefs, appendix=[(diagnostics.SECTION_TITLE, quality)])
    await db.execute(
        "INSERT OR REPLACE INTO sim_reports(sim_id, path, title, summary, sections, tool_calls, citations,"
        " unverified, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
        (sim_id, str(result.path), result.title, result.summary, len(result.sections), result.tool_calls,
         len(result.citations), len(result.unverified), utcnow()))
    return result


def summary_of(result: ReportResult) -> dict[str, Any]:
    return {"report": str(result.path), "charts_dir": str(result.path.parent / "charts"), "sections": len(result.sections), "charts": len(result.charts),
            "tool_calls": result.tool_calls, "citations": len(result.citations),
            "unverified_citations": len(result.unverified)}


async def step(ctx) -> dict[str, Any]:
    """The pipeline step (ctx: pipeline.SimContext)."""
    result = await make_report(ctx.db, ctx.config, ctx.llm, ctx.graph, ctx.sim_id, job=ctx.job_id,
                               scope=ctx.scope, progress=ctx.progress)
    return summary_of(result)


def register() -> None:
    """Append the step to the pipeline; the run step registers first (feature order)."""
    if not any(name == "report" for name, _ in pipeline.STEPS):
        pipeline.add_step("report", step)
