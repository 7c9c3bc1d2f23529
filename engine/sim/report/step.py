"""Step 5 of the simulation pipeline ("report"), and the report job of the chat.

``make_report`` is shared by the step and the report job (engine.sim.simulations). It needs a
finished run. Interviews go to the run's agents through the run service ``runs`` (the live
environment, or one reopened from the databases), with answers from the agents' personas when
the run cannot be reached or no run service is given. Every report has the beliefs per round
(chart, replay GIF) and the run's quality diagnostics (engine.sim.report.diagnostics).

The report of an ensemble (engine.sim.ensemble) is one report over all its runs: first the
section "Across the N runs" with the charts with bands, then the diagnostics of its median-most
run, whose posts, agents and interviews the written sections use (the agent sees every run
through its ``ensemble_runs`` tool); its summary starts with the confidence line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.db import Database
from engine.i18n import _
from engine.jobs import JobError
from engine.memory import MemoryEngine
from engine.offload import run_cpu
from engine.sim import records
from engine.sim.context import SimContext
from engine.sim.ensemble import report as ensemble_report
from engine.sim.ensemble.charts import draw_ensemble_charts
from engine.sim.report import diagnostics
from engine.sim.report.agent import Progress, ReportResult, write_report
from engine.sim.report.charts import CHARTS_DIR
from engine.sim.report.sources import Interviewer, PersonaInterviewer, RunInterviewer, StoreGraph
from engine.sim.run.output import platforms_of
from engine.sim.run.service import SimRuns


async def make_report(db: Database, config, llm, store, runs: SimRuns | None, sim_id: str, *,
                      memory: MemoryEngine, interviewer: Interviewer | None = None, job: str | None = None,
                      scope: str | None = None, progress: Progress | None = None) -> ReportResult:
    """Write the report of simulation ``sim_id`` from its run's data, its graph ``store`` and its
    memory scope in ``memory`` (where the report searches its posts)."""
    sim = await records.get(db, sim_id)
    if sim is None:
        raise JobError(_("simulation {sim} no longer exists", sim=sim_id))
    done = await records.completed_steps(db, sim_id)
    ensemble = await ensemble_report.load(db, sim) if sim.runs > 1 else None
    run = ensemble.representative if ensemble is not None else sim   # the run the sections read
    if "run" not in done or not await run_cpu(platforms_of, run.folder):
        raise JobError(_("simulation {sim} has not finished its run yet: there is nothing to report", sim=sim_id))
    if interviewer is None:
        interviewer = PersonaInterviewer(llm, run.folder, job, scope, lang=sim.spec.language)
        if runs is not None:
            interviewer = RunInterviewer(runs, run.id, fallback=interviewer)
    charts_dir = Path(sim.folder) / CHARTS_DIR
    if ensemble is None:
        charts, quality = await diagnostics.report_section(db, sim_id, sim.folder, charts_dir)
        appendix = [(_(diagnostics.SECTION_TITLE), quality)]
    else:
        charts = await run_cpu(draw_ensemble_charts, ensemble.spread, ensemble.activity(), charts_dir)
        quality = (await diagnostics.report_section(db, run.id, run.folder, None))[1]
        appendix = [(_("{title}: run {run}, the median-most", title=_(diagnostics.SECTION_TITLE), run=run.run_no),
                     quality)]
    result = await write_report(run.folder, llm, StoreGraph(store, sim_id), interviewer, config.report,
                                memory=memory, requirement=sim.spec.requirement, sim_id=run.id, job=job, scope=scope,
                                progress=progress, extra_charts=charts, appendix=appendix, ensemble=ensemble,
                                lang=sim.spec.language)
    await records.record_report(db, sim_id, result.path, result.title, result.summary, len(result.sections),
                                result.tool_calls, len(result.citations), len(result.unverified))
    return result


def summary_of(result: ReportResult) -> dict[str, Any]:
    return {"report": str(result.path), "charts_dir": str(result.path.parent / "charts"),
            "sections": len(result.sections), "charts": len(result.charts),
            "tool_calls": result.tool_calls, "citations": len(result.citations),
            "unverified_citations": len(result.unverified)}


async def step(ctx: SimContext) -> dict[str, Any]:
    """The pipeline step."""
    if ctx.memory is None:
        raise JobError(_("the report searches the simulation's posts in memory, and no memory engine was given"))
    result = await make_report(ctx.db, ctx.config, ctx.llm, ctx.graph, ctx.runs, ctx.sim_id, memory=ctx.memory,
                               job=ctx.job_id, scope=ctx.scope, progress=ctx.progress)
    return summary_of(result)
