"""What a pipeline step is given: ``SimSpec`` (what was asked) and ``SimContext`` (everything a
step may use), and the types of a step and of its progress callback.

A module of its own so the steps (ontology, graph, environment, run, report) and the pipeline
that lists them import it without importing each other.

``SimContext`` holds:

    sim_id, folder            identity and the simulation's folder; ``path(name)`` joins into it
    db, config                the Database and the whole Config
    llm                       LLMClient; pass ``job=ctx.job_id, scope=ctx.scope`` to every call
    embedder                  ``async embed(texts) -> ndarray`` (L2-normalised rows)
    graph                     GraphStore over this database (search, facts, entity, ...); the
                              Simulations service passes its shared one, so its cache sees this
                              simulation's rewrites
    runs                      the SimRuns service that starts, follows, stops and interviews runs
                              (None: no run service, the run step refuses)
    spec                      SimSpec: documents (file names in documents/), requirement,
                              agents and rounds as requested (None = config default)
    job_id, scope, channel    the job running the pipeline (budget and usage key), its chat scope
    progress(f, message)      report progress within the current step (f in 0..1)
    step                      name of the running step
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from engine.config import Config
from engine.db import Database
from engine.llm import LLMClient
from engine.sim.graphstore import GraphStore
from engine.sim.vectors import TextEmbedder

if TYPE_CHECKING:
    from engine.sim.run.service import SimRuns

StepFn = Callable[["SimContext"], Awaitable[dict[str, Any] | None]]
# (step, fraction within the step, message)
ProgressFn = Callable[[str, float | None, str], Awaitable[None]]


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
    graph: GraphStore | None = None
    runs: "SimRuns | None" = None

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
