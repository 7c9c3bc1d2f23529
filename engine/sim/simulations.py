"""The simulation service: the one way the chat (and the CLI) reach simulations.

``Simulations`` is a thin facade over free functions (graphiti style): the SQL on the
simulation tables is in ``engine.sim.records``, the pipeline in ``engine.sim.pipeline``, runs in
``engine.sim.run.service.SimRuns``, the report in ``engine.sim.report.step``. It holds what
they need, once per process: the database, config, the job runner, the run service ``runs``
(passed in, never looked up), the LLM client (None when no endpoint is configured: jobs that
need it fail with one clear line), the embedder (the memory's, one model load per process) and
the graph store shared by every simulation.

``register_jobs`` registers the job kinds "simulation" (the pipeline; resuming skips finished
steps) and "report" (writes the report of a finished run; ``on_report`` is told when one is
written, so the chat can post it). ``start``/``close`` recover runs interrupted by a restart
and end this process's runs.

Later features (inject, fork, compare, export) add one-line methods that call their own
modules under engine/sim/.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Awaitable, Callable

from engine.config import Config
from engine.db import Database
from engine.jobs import Job, JobContext, JobError, JobRunner
from engine.llm import LLMClient
from engine.sim import pipeline, records
from engine.sim.compare import CompareResult, compare_simulations
from engine.sim.context import SimSpec
from engine.sim.export import ExportFiles, export_simulation
from engine.sim.graphstore import GraphStore
from engine.sim.records import SimListing, SimRecord
from engine.sim.report.agent import ReportResult
from engine.sim.report.step import make_report
from engine.sim.run.service import RunState, SimRuns
from engine.sim.vectors import TextEmbedder
from engine.words import plural

log = logging.getLogger(__name__)

NO_LLM = "no LLM is configured: set [llm] base_url in config.toml"
# (job of kind "report", the simulation, the report written)
ReportListener = Callable[[JobContext, str, ReportResult], Awaitable[None]]


class Simulations:
    def __init__(self, db: Database, config: Config, jobs: JobRunner, runs: SimRuns, llm: LLMClient | None,
                 embedder: TextEmbedder, graph: GraphStore | None = None,
                 steps: pipeline.Steps = pipeline.STEPS):
        self.db = db
        self.config = config
        self.jobs = jobs
        self.runs = runs
        self.llm = llm
        self.embedder = embedder
        self.graph = graph or GraphStore(db, embedder, config.simulation.graph_cache_size)
        self.steps = steps  # the pipeline; a prefix of it stops early (tests, benchmarks)

    # -- records --------------------------------------------------------------------------

    async def create(self, files: list[Path], requirement: str, scope: str, channel: str | None = None,
                     agents: int | None = None, rounds: int | None = None,
                     folder: Path | None = None) -> tuple[str, SimSpec]:
        return await records.create(self.db, self.config, files, requirement, scope, channel, agents, rounds, folder)

    async def get(self, sim_id: str, scope: str | None = None) -> SimRecord | None:
        return await records.get(self.db, sim_id, scope)

    async def listing(self, scope: str, limit: int = 15) -> list[SimListing]:
        return await records.listing(self.db, scope, limit)

    async def completed_steps(self, sim_id: str) -> dict[str, dict]:
        return await records.completed_steps(self.db, sim_id)

    async def starter(self, sim_id: str, scope: str) -> str | None:
        return await records.starter(self.db, sim_id, scope)

    async def job_of(self, sim: SimRecord) -> Job | None:
        """The simulation's (latest) pipeline job."""
        return await self.jobs.get(sim.job_id) if sim.job_id else None

    async def active_job(self, sim_id: str) -> str | None:
        return await records.active_job(self.db, sim_id)

    async def report_job(self, sim_id: str) -> str | None:
        return await records.report_job(self.db, sim_id)

    async def run_state(self, sim_id: str) -> RunState | None:
        return await self.runs.get(sim_id)

    # -- starting ---------------------------------------------------------------------------

    async def submit(self, sim_id: str, scope: str, channel: str | None, started_by: str) -> Job:
        """Start the pipeline job of a registered simulation."""
        job = await self.jobs.submit("simulation", {"sim_id": sim_id}, scope, channel=channel,
                                     title=f"simulation {sim_id}", started_by=started_by)
        await records.set_job(self.db, sim_id, job.id)
        return job

    async def submit_report(self, sim_id: str, scope: str, channel: str | None, started_by: str) -> Job:
        return await self.jobs.submit("report", {"sim_id": sim_id}, scope, channel=channel,
                                      title=f"report {sim_id}", started_by=started_by)

    # -- reports --------------------------------------------------------------------------

    async def no_report_reason(self, sim: SimRecord) -> str | None:
        """Why the simulation can have no report (its run never finished), or None.

        Said at once instead of starting a report job that would fail the same way."""
        if "run" not in {name for name, _ in self.steps} or "run" in await self.completed_steps(sim.id):
            return None
        job = await self.job_of(sim)
        if job is None:
            return f"Simulation `{sim.id}` has no report: its run never took place."
        how = f"failed: {job.error}" if job.state == "failed" else f"was {job.state}"
        hint = f" /resume {job.id} continues it." if job.resumable else ""
        return f"Simulation `{sim.id}` has no report: its run did not finish (job `{job.id}` {how}).{hint}"

    async def write_report(self, sim_id: str, job: str | None = None, scope: str | None = None,
                           progress=None) -> ReportResult:
        if self.llm is None:
            raise JobError("reports need an LLM: set [llm] base_url in config.toml")
        return await make_report(self.db, self.config, self.llm, self.graph, self.runs, sim_id, job=job,
                                 scope=scope, progress=progress)

    # -- exports and comparisons ----------------------------------------------------------------

    async def export(self, sim: SimRecord, out_dir: Path | None = None) -> ExportFiles:
        return await export_simulation(self.db, sim.id, sim.folder, out_dir or sim.folder / "export")

    async def compare(self, a: SimRecord, b: SimRecord, job: str | None = None, scope: str | None = None,
                      progress=None) -> CompareResult:
        return await compare_simulations(self.db, self.llm, (a.id, a.folder), (b.id, b.folder),
                                         self.config.data_dir / "compare" / f"{a.id}-vs-{b.id}", job=job,
                                         scope=scope, progress=progress)

    # -- jobs and life cycle ------------------------------------------------------------------

    def register_jobs(self, on_report: ReportListener | None = None) -> None:
        """Register the job kinds "simulation" and "report" on the job runner."""

        async def simulation(job: JobContext) -> dict[str, Any]:
            if self.llm is None:
                raise JobError(NO_LLM)
            handler = pipeline.job_handler(self.db, self.config, self.llm, self.embedder, self.graph, self.runs,
                                           self.steps)
            result = await handler(job)
            await job.progress(1.0, f"{plural(result['llm_calls'], 'LLM call')}, "
                                    f"{plural(result['tokens'], 'token')} used"
                               + (f", ≈ ${result['cost_usd']:.2f}" if result["cost_usd"] else ""))
            return result

        async def report(job: JobContext) -> dict[str, Any]:
            sim_id = job.params["sim_id"]
            result = await self.write_report(sim_id, job=job.id, scope=job.job.scope, progress=job.progress)
            if on_report is not None:
                await on_report(job, sim_id, result)
            return {"sim_id": sim_id, "report": str(result.path), "tool_calls": result.tool_calls}

        self.jobs.register("simulation", simulation)
        self.jobs.register("report", report)

    async def start(self) -> None:
        """Recover the runs a restart interrupted (they resume with their jobs)."""
        for sim_id in await self.runs.recover():
            log.warning("simulation run %s was interrupted by a restart", sim_id)

    async def close(self) -> None:
        await self.runs.executor.close()
        await self.runs.close()
