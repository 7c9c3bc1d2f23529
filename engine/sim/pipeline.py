"""The simulation pipeline: numbered steps with checkpoints in the database and the folder.

A simulation lives in ``<data_dir>/sims/<sim_id>/``:

    documents/               copies of the submitted files
    documents.json           their extracted text                    (step ontology)
    ontology.json            entity and relation types               (step ontology)
    extraction/NNNNN.json    per-chunk extraction cache              (step graph)
    graph_summary.json       counts, types, most connected entities  (step graph)
    personas/, personas.json persona batches and the final personas  (step environment)
    twitter_profiles.csv, reddit_profiles.json, simulation_config.json (step environment)

Steps are ``(name, async fn(ctx) -> dict)`` entries of ``STEPS``; later steps (the run, the
report) are added with ``add_step``. ``run_pipeline`` runs the steps in order, skipping every
step recorded in ``sim_steps``; each finished step records its summary dict and the LLM
calls and tokens it used. A step must be idempotent: if it dies half-way it is run again,
so it overwrites its own outputs (steps cache partial work in the folder to avoid re-asking
the LLM).

``SimContext`` is everything a step may use:

    sim_id, folder            identity and the folder above; ``path(name)`` joins into it
    db, config                the Database and the whole Config
    llm                       LLMClient; pass ``job=ctx.job_id, scope=ctx.scope`` to every call
    embedder                  ``async embed(texts) -> ndarray`` (L2-normalised rows)
    graph                     GraphStore over this database (search, facts, entity, ...);
                              the bot passes its shared one (app.services["sim_graph"])
    memory                    MemoryEngine that holds the simulation's memory scope (the report
                              searches its posts there): the bot's own (app.services["memory"]);
                              the report step needs it
    spec                      SimSpec: documents (file names in documents/), requirement,
                              agents and rounds as requested (None = config default)
    job_id, scope, channel    the job running the pipeline (budget and usage key), its chat scope
    progress(f, message)      report progress within the current step (f in 0..1)
    step                      name of the running step
"""
from __future__ import annotations

import json
import logging
import secrets
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

from engine.config import Config
from engine.db import Database
from engine.jobs import JobContext, JobError
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.sim import environment, graph, ontology, sizing
from engine.sim.graphstore import GraphStore
from engine.sim.vectors import TextEmbedder

log = logging.getLogger(__name__)

StepFn = Callable[["SimContext"], Awaitable[dict[str, Any] | None]]
# (step, fraction within the step, message)
ProgressFn = Callable[[str, float | None, str], Awaitable[None]]

STEPS: list[tuple[str, StepFn]] = [
    ("ontology", ontology.step),
    ("graph", graph.step),
    ("environment", environment.step),
]


def add_step(name: str, fn: StepFn) -> None:
    """Append a step (the run and report steps register themselves this way)."""
    if any(n == name for n, _ in STEPS):
        raise ValueError(f"pipeline step {name!r} exists already")
    STEPS.append((name, fn))


@dataclass
class SimSpec:
    documents: list[str]
    requirement: str
    agents: int | None = None
    rounds: int | None = None


@dataclass
class SimContext:
    sim_id: str
    folder: Path
    db: Database
    llm: LLMClient
    embedder: TextEmbedder
    spec: SimSpec
    config: Config
    job_id: str | None = None
    scope: str | None = None
    channel: str | None = None
    on_progress: ProgressFn | None = None
    step: str = ""
    graph: GraphStore | None = None  # share the bot's store so its cache sees this sim's rewrites
    memory: MemoryEngine | None = None  # the bot's engine: one owner of each scope's state

    def __post_init__(self) -> None:
        if self.graph is None:
            self.graph = GraphStore(self.db, self.embedder, self.config.simulation.graph_cache_size)
        if self.job_id is None:  # usage and budget are counted per job; a bare run counts per sim
            self.job_id = f"sim:{self.sim_id}"

    def path(self, name: str) -> Path:
        return self.folder / name

    async def progress(self, fraction: float | None, message: str) -> None:
        if self.on_progress is not None:
            await self.on_progress(self.step, fraction, message)


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sims_dir(config: Config) -> Path:
    return config.data_dir / "sims"


async def create_simulation(db: Database, config: Config, files: list[Path], requirement: str, scope: str,
                            channel: str | None = None, agents: int | None = None, rounds: int | None = None,
                            folder: Path | None = None) -> tuple[str, SimSpec]:
    """Register a simulation and copy its documents into its folder."""
    requirement = requirement.strip()
    if not requirement:
        raise JobError("say what the simulation should predict (the requirement is empty)")
    sizing.check(agents, rounds)
    sim_id = secrets.token_hex(4)
    folder = (folder or sims_dir(config) / sim_id).resolve()
    if folder.exists() and any(folder.iterdir()):
        # its caches (extractions, personas) would be taken for this simulation's
        raise JobError(f"the folder {folder} is not empty; choose a new one")
    docs = folder / "documents"
    docs.mkdir(parents=True, exist_ok=True)
    names = []
    for f in files:
        name = f.name
        n = 2
        while name in names:  # two attachments with one name stay two documents
            name, n = f"{f.stem}_{n}{f.suffix}", n + 1
        shutil.copyfile(f, docs / name)
        names.append(name)
    spec = SimSpec(names, requirement, agents, rounds)
    await db.execute(
        "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at) VALUES (?,?,?,?,?,?,?)",
        (sim_id, scope, channel, requirement, json.dumps(asdict(spec)), str(folder), utcnow()))
    return sim_id, spec


async def load_simulation(db: Database, sim_id: str) -> tuple[SimSpec, Path, str, str | None] | None:
    row = await db.fetchone("SELECT * FROM simulations WHERE id=?", (sim_id,))
    if row is None:
        return None
    return SimSpec(**json.loads(row["spec"])), Path(row["folder"]), row["scope"], row["channel"]


async def completed_steps(db: Database, sim_id: str) -> dict[str, dict]:
    rows = await db.fetchall("SELECT * FROM sim_steps WHERE sim_id=? ORDER BY finished_at, rowid", (sim_id,))
    return {r["step"]: {"summary": json.loads(r["summary"]), "llm_calls": r["llm_calls"], "tokens": r["tokens"],
                        "finished_at": r["finished_at"]} for r in rows}


async def run_pipeline(ctx: SimContext, steps: list[tuple[str, StepFn]] | None = None) -> dict[str, Any]:
    """Run every step not yet completed; returns {step: summary} for all steps."""
    steps = STEPS if steps is None else steps
    done = await completed_steps(ctx.db, ctx.sim_id)
    results: dict[str, Any] = {name: info["summary"] for name, info in done.items()}
    for number, (name, fn) in enumerate(steps, 1):
        if name in done:
            continue
        ctx.step = name
        await ctx.progress(0.0, f"step {number}/{len(steps)}: {name}")
        before = await ctx.llm.job_usage(ctx.job_id)
        summary = await fn(ctx) or {}
        after = await ctx.llm.job_usage(ctx.job_id)
        calls, tokens = after.calls - before.calls, after.tokens - before.tokens
        await ctx.db.execute(
            "INSERT OR REPLACE INTO sim_steps(sim_id, step, summary, llm_calls, tokens, finished_at)"
            " VALUES (?,?,?,?,?,?)", (ctx.sim_id, name, json.dumps(summary), calls, tokens, utcnow()))
        results[name] = summary
        await ctx.progress(1.0, f"step {number}/{len(steps)}: {name} done")
        log.info("simulation %s: step %s done (%d LLM calls, %d tokens)", ctx.sim_id, name, calls, tokens)
    return results


def job_handler(db: Database, config: Config, llm: LLMClient, embedder: TextEmbedder,
                graph_store: GraphStore | None = None, memory: MemoryEngine | None = None):
    """The handler of job kind "simulation"; params: {"sim_id": ...}. Resuming skips finished steps."""

    async def handle(job: JobContext) -> dict[str, Any]:
        sim_id = job.params["sim_id"]
        loaded = await load_simulation(db, sim_id)
        if loaded is None:
            raise JobError(f"simulation {sim_id} no longer exists")
        spec, folder, scope, channel = loaded
        await db.execute("UPDATE simulations SET job_id=? WHERE id=?", (job.id, sim_id))
        names = [n for n, _ in STEPS]

        async def report(step: str, fraction: float | None, message: str) -> None:
            index = names.index(step) if step in names else 0
            overall = (index + (fraction or 0.0)) / len(names)
            await job.progress(overall, f"{step}: {message}" if not message.startswith("step") else message,
                               step=step, step_index=index, steps=len(names), step_fraction=fraction)

        ctx = SimContext(sim_id, folder, db, llm, embedder, spec, config, job_id=job.id, scope=scope,
                         channel=channel, on_progress=report, graph=graph_store, memory=memory)
        results = await run_pipeline(ctx)
        usage = await llm.job_usage(job.id)
        return {"sim_id": sim_id, "folder": str(folder), "steps": results, "llm_calls": usage.calls,
                "tokens": usage.tokens, "cost_usd": round(usage.cost_usd, 6)}

    return handle
