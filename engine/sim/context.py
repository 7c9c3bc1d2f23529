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
    memory                    the MemoryEngine holding the simulation's memory scope, where the
                              report searches its posts (None: the report step refuses)
    spec                      SimSpec: documents (file names in documents/), requirement,
                              agents, rounds and runs as requested (None = config default), and
                              the language everything the LLM writes for it is in
                              (``spec_language``; each step's prompts ask for it by name)
    job_id, scope, channel    the job running the pipeline (budget and usage key), its chat scope
    progress(f, message)      report progress within the current step (f in 0..1), a line in the
                              current language (engine.i18n) that the pipeline puts after the
                              step's name (``whole=True``: the line as it is, a step's boundary)
    step                      name of the running step
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from engine import language
from engine.config import Config
from engine.db import Database
from engine.i18n import _
from engine.jobs import JobError
from engine.llm import LLMClient
from engine.memory import terms
from engine.sim.graph.store import GraphStore
from engine.sim.graph.vectors import TextEmbedder

if TYPE_CHECKING:
    from engine.memory import MemoryEngine
    from engine.sim.run.service import SimRuns

StepFn = Callable[["SimContext"], Awaitable[dict[str, Any] | None]]
# (step, fraction within the step, message[, whole: the message is the whole line])
ProgressFn = Callable[..., Awaitable[None]]


@dataclass
class SimSpec:
    documents: list[str]
    requirement: str
    agents: int | None = None
    rounds: int | None = None
    runs: int | None = None       # step 4 as this many runs (engine.sim.ensemble); None: one
    language: str = language.DEFAULT   # BCP 47 (engine.language); simulations from before it: English


LANGUAGE_PARAGRAPHS = 60   # the documents' first paragraphs their language is read from


def spec_language(requirement: str, documents: Sequence[str], asked: str | None = None) -> str:
    """The language a simulation writes in (ontology descriptions, personas, posts, interviews,
    the report): ``asked`` (``--lang``) when given; else the requirement's; when the requirement
    is English or too short to tell, the language most of the documents' paragraphs are in;
    else English. Raises JobError when ``asked`` names no language. Blocking (language
    detection): call it through ``run_cpu``."""
    if asked is not None:
        chosen = language.normalize(asked)
        if chosen is None:
            raise JobError(_("{code} is not a language code; give one such as en, pt-BR or th", code=repr(asked)))
        return chosen
    own = terms.sure_language(requirement)
    if own is not None and own != language.DEFAULT and language.known(own):
        return language.normalize(own) or language.DEFAULT
    paragraphs = [p for text in documents for p in text.split("\n\n") if p.strip()][:LANGUAGE_PARAGRAPHS]
    found = terms.dominant_language(paragraphs)
    return (language.normalize(found) if found is not None and language.known(found) else None) or language.DEFAULT


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
    memory: "MemoryEngine | None" = None

    def __post_init__(self) -> None:
        if self.graph is None:
            self.graph = GraphStore(self.db, self.embedder, self.config.simulation.graph_cache_size)
        if self.job_id is None:  # usage and budget are counted per job; a bare run counts per sim
            self.job_id = f"sim:{self.sim_id}"

    def path(self, name: str) -> Path:
        return self.folder / name

    async def progress(self, fraction: float | None, message: str, whole: bool = False) -> None:
        if self.on_progress is not None:
            await self.on_progress(self.step, fraction, message, whole=whole)
