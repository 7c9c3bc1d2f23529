"""The simulation pipeline: five fixed steps with checkpoints in the database and the folder.

A simulation lives in ``<data_dir>/sims/<sim_id>/``:

    documents/               copies of the submitted files
    documents.json           their extracted text                    (step ontology)
    ontology.json            entity and relation types               (step ontology)
    extraction/NNNNN.json    per-chunk extraction cache              (step graph)
    graph_summary.json       counts, types, most connected entities  (step graph)
    personas/, personas.json persona batches and the final personas  (step environment)
    twitter_profiles.csv, reddit_profiles.json, simulation_config.json (step environment)
    twitter/, reddit/        the run's databases, actions.jsonl, checkpoints (step run)
    report/                  report.md, summary.txt, charts/          (step report)

``STEPS`` is the fixed list ontology, graph, environment, run, report: the engine owns it, and
no feature adds to it. ``run_pipeline`` runs the steps in order (a prefix of ``STEPS`` when
given one: benchmarks and tests stop after the environment), skipping every step recorded in
``sim_steps``; each finished step records its summary dict and the LLM calls and tokens it
used. A step must be idempotent: if it dies half-way it is run again, so it overwrites its
own outputs (steps cache partial work in the folder to avoid re-asking the LLM).

What a step is given is ``engine.sim.context.SimContext``; the job of kind "simulation" is
``job_handler``, registered by ``engine.sim.simulations.Simulations``.

The job's progress line is in the job's language (engine.i18n): a step's boundaries read "step
2/5: graph" and "step 2/5: graph done", and a line a step reports is put after its step's name
("graph: extracted 3/8 chunks"); ``step_name`` is a step as the chat reads it.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

from engine.config import Config
from engine.db import Database
from engine.i18n import N_, _
from engine.jobs import JobContext, JobError
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.sim import ontology, records
from engine.sim.context import SimContext, StepFn
from engine.sim.environment import step as environment_step
from engine.sim.graph import step as graph_step
from engine.sim.graph.store import GraphStore
from engine.sim.graph.vectors import TextEmbedder
from engine.sim.report import step as report_step
from engine.sim.run import step as run_step
from engine.sim.run.service import SimRuns

log = logging.getLogger(__name__)

Steps = Sequence[tuple[str, StepFn]]

STEPS: tuple[tuple[str, StepFn], ...] = (
    ("ontology", ontology.step),
    ("graph", graph_step.step),
    ("environment", environment_step.step),
    ("run", run_step.step),
    ("report", report_step.step),
)
# How each step reads in a chat (translated where shown: ``step_name``).
STEP_NAMES = {"ontology": N_("ontology"), "graph": N_("graph"), "environment": N_("environment"),
              "run": N_("run"), "report": N_("report")}


def step_name(step: str) -> str:
    """A step's name in the current language."""
    return _(STEP_NAMES[step]) if step in STEP_NAMES else step


# The figures of the steps' summaries (``sim_steps``) as a chat reads them (``fact_name``).
FACT_NAMES = {
    "documents": N_("documents"), "chars": N_("characters"), "chunks": N_("chunks"), "entities": N_("entities"),
    "facts": N_("facts"), "mentions": N_("mentions"), "names": N_("names"),
    "merged_by_embedding": N_("merged by embedding"), "dropped_relations": N_("dropped relations"),
    "agents": N_("agents"), "rounds": N_("rounds"), "llm_personas": N_("personas by the LLM"),
    "initial_posts": N_("initial posts"), "scheduled_events": N_("scheduled events"),
    "events_from_llm": N_("events by the LLM"), "actions": N_("actions"), "restart": N_("restart"),
    "report": N_("report"), "charts_dir": N_("charts"), "sections": N_("sections"), "charts": N_("charts"),
    "tool_calls": N_("tool calls"), "citations": N_("citations"), "unverified_citations": N_("unverified citations")}


def fact_name(key: str) -> str:
    """A figure of a step's summary in the current language ("twitter actions" -> "ações no twitter")."""
    if key.endswith(" actions"):   # the run step's per platform count
        return _("{platform} actions", platform=key.removesuffix(" actions"))
    return _(FACT_NAMES[key]) if key in FACT_NAMES else key.replace("_", " ")


def step_line(step: str, message: str) -> str:
    """A line a step reported, after its step's name ("graph: extracted 3/8 chunks")."""
    return f"{step_name(step)}: {message}"


async def run_pipeline(ctx: SimContext, steps: Steps = STEPS) -> dict[str, Any]:
    """Run every step not yet completed; returns {step: summary} for all steps."""
    done = await records.completed_steps(ctx.db, ctx.sim_id)
    results: dict[str, Any] = {name: info["summary"] for name, info in done.items()}
    for number, (name, fn) in enumerate(steps, 1):
        if name in done:
            continue
        ctx.step = name
        await ctx.progress(0.0, _("step {number}/{total}: {step}", number=number, total=len(steps),
                                  step=step_name(name)), whole=True)
        before = await ctx.llm.job_usage(ctx.job_id)
        summary = await fn(ctx) or {}
        after = await ctx.llm.job_usage(ctx.job_id)
        calls, tokens = after.calls - before.calls, after.tokens - before.tokens
        await records.record_step(ctx.db, ctx.sim_id, name, summary, calls, tokens)
        results[name] = summary
        await ctx.progress(1.0, _("step {number}/{total}: {step} done", number=number, total=len(steps),
                                  step=step_name(name)), whole=True)
        log.info("simulation %s: step %s done (%d LLM calls, %d tokens)", ctx.sim_id, name, calls, tokens)
    return results


def job_handler(db: Database, config: Config, llm: LLMClient, embedder: TextEmbedder,
                graph_store: GraphStore | None = None, runs: SimRuns | None = None, steps: Steps = STEPS,
                memory: MemoryEngine | None = None):
    """The handler of job kind "simulation"; params: {"sim_id": ...}. Resuming skips finished steps."""

    async def handle(job: JobContext) -> dict[str, Any]:
        sim_id = job.params["sim_id"]
        sim = await records.get(db, sim_id)
        if sim is None:
            raise JobError(_("simulation {sim} no longer exists", sim=sim_id))
        await records.set_job(db, sim_id, job.id)
        names = [n for n, _ in steps]

        async def report(step: str, fraction: float | None, message: str, whole: bool = False) -> None:
            index = names.index(step) if step in names else 0
            overall = (index + (fraction or 0.0)) / len(names)
            await job.progress(overall, message if whole else step_line(step, message),
                               step=step, step_index=index, steps=len(names), step_fraction=fraction)

        ctx = SimContext(sim_id, sim.folder, db, llm, embedder, sim.spec, config, job_id=job.id, scope=sim.scope,
                         channel=sim.channel, on_progress=report, graph=graph_store, runs=runs, memory=memory)
        results = await run_pipeline(ctx, steps)
        usage = await llm.job_usage(job.id)
        return {"sim_id": sim_id, "folder": str(sim.folder), "steps": results, "llm_calls": usage.calls,
                "tokens": usage.tokens, "cost_usd": round(usage.cost_usd, 6)}

    return handle
