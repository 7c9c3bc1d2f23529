"""The simulation service: the one way the chat (and the CLI) reach simulations.

``Simulations`` is a thin facade over free functions (graphiti style): the SQL on the
simulation tables is in ``engine.sim.records``, the pipeline in ``engine.sim.pipeline``, runs in
``engine.sim.run.service.SimRuns``, the report in ``engine.sim.report.step``. It holds what
they need, once per process: the database, config, the job runner, the run service ``runs``
(passed in, never looked up; ``build`` makes the process's own), the LLM client (None when no
endpoint is configured: jobs that need it fail with one clear line), the embedder (the memory's,
one model load per process), the graph store shared by every simulation and the process's memory
engine, which holds each simulation's memory scope: each completed round of a run goes into it
(engine.sim.sim_memory, a round observer of ``runs``) and the report searches the posts there.
engine.services builds the one of each process.

``register_jobs`` (called by ``build``) registers the job kinds "simulation" (the pipeline;
resuming skips finished steps; at most ``[simulation] max_active_per_*`` queued or running per
scope and person) and "report" (writes the report of a finished run; the chat posts it once the
job is done, bot.progress). ``start``/``close`` recover runs interrupted by a restart
and end this process's runs.

Later features (inject, fork, compare, export, seed briefs, the graph's pictures, the agents'
roster) add one-line methods that call their own modules under engine/sim/. A simulation of
several runs (an ensemble, engine.sim.ensemble) is reached through the same methods: its status,
stop, report chat, exports, comparisons, injected events and forks act on its runs (``ensemble``,
``pick_run``). The service listens to memory's forgetting (``MemoryEngine.on_forget``): the lines
of seed briefs taken from memory go with what their authors forgot (``forget_in_briefs``), and a
pipeline job checks its brief against memory again before its first step reads it.

It is also the one module of engine/sim the chat and the CLI import (tests/test_imports.py holds
them to it): the few names they need besides the service, records and the words of refusals,
chart titles, a step's and its facts' names as people read them, where a report's files are,
are re-exported here (``__all__``).
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from engine import language
from engine.config import Config
from engine.db import Database
from engine.i18n import N_, _, english
from engine.jobs import Job, JobCaps, JobContext, JobError, JobRunner, state_name
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.memory.audience import PUBLIC, Viewer
from engine.memory.models import Forgotten, utcnow
from engine.offload import run_cpu
from engine.owners import ProcessOwner
from engine.sim import outcome as outcomes, pipeline, records, roster, sim_memory
from engine.sim.compare import ensembles as compare_ensembles
from engine.sim.compare.charts import TITLES as COMPARE_CHART_TITLES
from engine.sim.compare.compare import CompareResult, compare_simulations
from engine.sim.context import SimSpec, spec_language
from engine.sim.ensemble import members as ensemble_members, report as ensemble_report
from engine.sim.ensemble.report import Ensemble
from engine.sim.environment import sizing
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.estimate import CHARS_PER_TOKEN, Estimate, brief_call, estimate, report_question
from engine.sim.fork import Fork, fork_rounds, fork_simulation, lineage
from engine.sim.graph.store import GraphStore
from engine.sim.graph.vectors import TextEmbedder
from engine.sim.inject.request import (
    Injected,
    InjectionState,
    InjectRefused,
    inject as inject_event,
    injection_status,
)
from engine.sim.outcome import SCALE as OUTCOME_SCALE, score_text, track_record_line
from engine.sim.pipeline import fact_name, step_line, step_name
from engine.sim.records import SimListing, SimRecord, not_here
from engine.sim.report import chat, chat_store
from engine.sim.report.agent import ReportResult, report_dir
from engine.sim.report.charts import TITLES as REPORT_CHART_TITLES
from engine.sim.report.chat import QUESTION_MAX_CHARS, ReportAnswer, report_exists
from engine.sim.report.export import ExportFiles, export_simulation
from engine.sim.report.sources import PERSONA_LABEL, Answer as PersonaAnswer, PersonaInterviewer, load_roster
from engine.sim.report.step import make_report
from engine.sim.roster import Agent
from engine.sim.run.fork_points import describe_rounds
from engine.sim.run.service import Answer, RunState, RunUnreachable, SimRuns
from engine.sim.run.step import make_runs
from engine.sim.seed import brief as seed_brief, draft, from_memory, store as seed_store
from engine.sim.seed.brief import FILE as BRIEF_FILE, Brief
from engine.sim.stance import tracking as stance
from engine.sim.stance.tracking import RoundSplit
from engine.words import in_english, plural

__all__ = [
    "Simulations", "SimRecord", "SimListing", "ReportAnswer", "Answer",
    "RunUnreachable", "InjectRefused", "not_here", "lineage", "describe_rounds", "report_dir", "report_exists",
    "QUESTION_MAX_CHARS", "PERSONA_LABEL", "REPORT_CHART_TITLES", "COMPARE_CHART_TITLES", "SimulationConfig",
    "Agent", "BRIEF_FILE", "OUTCOME_SCALE", "score_text", "track_record_line",
    "step_name", "step_line", "fact_name",
]

if TYPE_CHECKING:
    from engine.sim.graph.view import GraphPicture

log = logging.getLogger(__name__)

NO_LLM = N_("no LLM is configured: set [llm] base_url in config.toml")


class Simulations:
    def __init__(self, db: Database, config: Config, jobs: JobRunner, runs: SimRuns, llm: LLMClient | None,
                 embedder: TextEmbedder, memory: MemoryEngine, graph: GraphStore | None = None,
                 steps: pipeline.Steps = pipeline.STEPS):
        self.db = db
        self.config = config
        self.jobs = jobs
        self.runs = runs
        self.llm = llm
        self.embedder = embedder
        self.graph = graph or GraphStore(db, embedder, config.simulation.graph_cache_size)
        self.steps = steps  # the pipeline; a prefix of it stops early (tests, benchmarks)
        self.memory = memory
        runs.observers.append(sim_memory.round_observer(self.memory))
        self.memory.on_forget.append(self.forget_in_briefs)

    @classmethod
    def build(cls, config: Config, db: Database, jobs: JobRunner, owner: ProcessOwner, llm: LLMClient | None,
              embedder: TextEmbedder, memory: MemoryEngine) -> "Simulations":
        """The service with this process's run service (engine.sim.run.step.make_runs: runs held
        by ``owner``, their LLM usage in the client's ledger, so its budgets see it)."""
        runs = make_runs(db, config, owner, llm.usage if llm is not None else None, llm=llm)
        sims = cls(db, config, jobs, runs, llm, embedder, memory)
        sims.register_jobs()
        return sims

    # -- records --------------------------------------------------------------------------

    async def create(self, files: list[Path], requirement: str, scope: str, channel: str | None = None,
                     agents: int | None = None, rounds: int | None = None,
                     folder: Path | None = None, audience: str = PUBLIC, runs: int | None = None,
                     brief: Brief | None = None, texts: Sequence[str] = (),
                     language: str | None = None) -> tuple[str, SimSpec]:
        """Register a simulation of ``files`` (whose extracted ``texts`` tell their language), or of
        ``brief`` (its document ``brief.md``); its step 4 is ``runs`` runs. It writes in ``language``
        when given (``--lang``), else in its requirement's or its documents' (the brief's)
        (engine.sim.context.spec_language). A brief from memory is checked against memory first:
        lines forgotten since it was taken go."""
        if brief is None:
            chosen = await run_cpu(spec_language, requirement, texts, language)
            return await records.create(self.db, self.config, files, requirement, scope, channel, agents, rounds,
                                        folder, audience, runs, language=chosen)
        if brief.origin == "memory" and (stale := set(await from_memory.stale_lines(self.memory, scope, brief))):
            brief.lines = [line for line in brief.lines if (line.kind, line.source_id) not in stale]
            brief.removed += len(stale)
            if not brief.messages:
                raise from_memory.NothingLeft()
        text = brief.render()
        chosen = await run_cpu(spec_language, requirement, [text], language)
        sim_id, spec = await records.create(self.db, self.config, files, requirement, scope, channel, agents, rounds,
                                            folder, audience, runs, files_written=[(seed_brief.FILE, text)],
                                            language=chosen)
        await seed_store.save(self.db, sim_id, brief)
        return sim_id, spec

    async def get(self, sim_id: str, viewer: Viewer | None = None) -> SimRecord | None:
        """The simulation, if ``viewer`` may see it (engine.sim.records; None: the operator)."""
        return await records.get(self.db, sim_id, viewer)

    async def listing(self, viewer: Viewer, limit: int = 15) -> list[SimListing]:
        return await records.listing(self.db, viewer, limit)

    async def completed_steps(self, sim_id: str) -> dict[str, dict]:
        return await records.completed_steps(self.db, sim_id)

    async def starter(self, sim_id: str, viewer: Viewer) -> str | None:
        return await records.starter(self.db, sim_id, viewer)

    async def job_of(self, sim: SimRecord) -> Job | None:
        """The simulation's (latest) pipeline job."""
        return await self.jobs.get(sim.job_id) if sim.job_id else None

    async def active_job(self, sim_id: str) -> str | None:
        return await records.active_job(self.db, sim_id)

    async def report_job(self, sim_id: str) -> str | None:
        return await records.report_job(self.db, sim_id)

    async def run_state(self, sim_id: str) -> RunState | None:
        return await self.runs.get(sim_id)

    def run_config(self, state: RunState) -> SimulationConfig:
        """The agents and settings the run was prepared with (step 3's file in its folder)."""
        return SimulationConfig.model_validate_json((Path(state.folder) / CONFIG_FILE).read_text(encoding="utf-8"))

    async def fork_rounds(self, sim_id: str) -> list[int] | None:
        return await fork_rounds(self.db, sim_id)

    async def check_stoppable(self, sim: SimRecord) -> None:
        """Raise a JobError saying why this process cannot stop the run (none of its runs is
        running here: it is not running, or it runs in another process)."""
        ids = await self._run_ids(sim)
        if any([await self.runs.executor.attach(i) is not None for i in ids]):
            return
        where = None
        for i in ids:   # (a generator with await in it would be asynchronous: next() cannot take it)
            if (where := await self.runs.elsewhere(i)) is not None:
                break
        raise JobError(_("simulation {sim} runs in {where}; stop it there.", sim=sim.id, where=where) if where
                       else _("simulation {sim} is not running.", sim=sim.id))

    async def stop(self, sim: SimRecord) -> None:
        """Stop the simulation's runs at the end of their current round."""
        await asyncio.gather(*(self.runs.stop(i) for i in await self._run_ids(sim)))

    async def _run_ids(self, sim: SimRecord) -> list[str]:
        """The ids of the simulation's runs: an ensemble's registered runs, else itself."""
        return [m.id for m in await self.members(sim)] or [sim.id]

    # -- ensembles (engine.sim.ensemble) ------------------------------------------------------

    async def members(self, sim: SimRecord) -> list[SimRecord]:
        """The registered runs of an ensemble (none for a simulation of one run, or before step 4)."""
        return await records.members(self.db, sim.id) if sim.runs > 1 else []

    async def ensemble(self, sim: SimRecord, with_stats: bool = True) -> Ensemble | None:
        """The ensemble ``sim`` with its spread (None: one run, or no run registered yet)."""
        return await ensemble_report.load(self.db, sim, with_stats) if sim.runs > 1 else None

    async def ran(self, sim: SimRecord) -> list[tuple[int, str, Path]]:
        """(run number, id, folder) of each of its runs that has run (engine.sim.ensemble.members)."""
        return await ensemble_members.ran(self.db, sim)

    async def pick_run(self, sim: SimRecord, k: int | None = None) -> tuple[SimRecord, str]:
        """Run ``k`` of an ensemble (None: the median-most, and the second value says so: "the
        median-most of its 5 runs"); a simulation of one run is its own run (``k`` other than 1
        refused). JobError for a run it does not have."""
        if sim.runs <= 1:
            if k not in (None, 1):
                raise JobError(_("simulation {sim} has one run: there is no run {k}.", sim=sim.id, k=k))
            return sim, ""
        ensemble = await self.ensemble(sim, with_stats=False)
        if ensemble is None:
            raise JobError(_("simulation {sim} has not started its runs yet.", sim=sim.id))
        if k is None:
            return ensemble.representative, _("the median-most of its {runs}",
                                                runs=plural(ensemble.size, "{n} run", "{n} runs"))
        run = ensemble.run(k)
        if run is None:
            raise JobError(_("simulation {sim} has runs 1 to {last}: there is no run {k}.", sim=sim.id,
                                   last=ensemble.size, k=k))
        return run, ""

    # -- beliefs per round (engine.sim.stance.tracking) ------------------------------------------------

    async def beliefs(self, sim_id: str) -> list[RoundSplit]:
        return await stance.split_by_round(self.db, sim_id)

    async def beliefs_line(self, sim_id: str) -> str | None:
        return await stance.beliefs_line(self.db, sim_id)

    # -- sizes and costs (engine.sim.environment.sizing, engine.sim.estimate) ------------------

    @staticmethod
    def check_sizes(agents: int | None, rounds: int | None, runs: int | None = None) -> None:
        """Raise a JobError for agents, rounds or runs asked for that no simulation may have."""
        sizing.check(agents, rounds, runs)

    def sizes(self, agents: int | None, rounds: int | None, runs: int | None = None) -> sizing.Sizes:
        """The agents, rounds and runs a simulation gets (the asked ones within the configured caps)."""
        return sizing.resolve(self.config.simulation, agents, rounds, runs)

    async def estimate(self, documents: list, requirement: str, sizes: sizing.Sizes,
                       brief: tuple[int, int] | None = None) -> Estimate:
        """What a simulation of these documents would cost, before it starts (off the event loop);
        ``brief``: the (calls, tokens) of the LLM-drafted brief the documents are (``brief_cost``)."""
        return await asyncio.to_thread(estimate, self.config, documents, requirement, sizes, brief)

    @staticmethod
    def brief_cost(requirement: str, brief: Brief | None = None) -> tuple[int, int]:
        """(calls, tokens) of drafting a brief from ``requirement``: the drafted ``brief``'s, or
        before drafting, the most it may take."""
        return brief_call(requirement, len(brief.body) if brief else draft.ANSWER_TOKENS * CHARS_PER_TOKEN)

    def report_question_cost(self) -> tuple[int, int]:
        """About how many LLM calls and tokens one question to a report agent takes."""
        return report_question(self.config)

    async def weight(self, sim_id: str) -> int:
        """What the simulation's job counts for against ``max_active_per_*``: its runs."""
        sim = await records.get(self.db, sim_id)
        return sim.runs if sim is not None else 1

    # -- seed briefs: a simulation started without a document (engine.sim.seed) ---------------------

    async def draft_brief(self, requirement: str, scope: str, lang: str | None = None) -> Brief:
        """A brief drafted by the LLM from the requirement alone (one call, counted against ``scope``),
        in ``lang`` (``--lang``) when given, else in the requirement's language."""
        if self.llm is None:
            raise JobError(NO_LLM)
        return await draft.draft(self.llm, requirement, scope, language.normalize(lang) if lang else None)

    async def memory_brief(self, viewer: Viewer, *, world: str | None = None, channel: str | None = None,
                           since: datetime | None = None) -> Brief:
        """A brief of this chat's memory as ``viewer`` reads it: the world ``world`` (name or id), or
        ``channel`` since ``since`` (default: ``[simulation] brief_chat_days`` ago)."""
        if world is not None:
            return await from_memory.world_brief(self.memory, self.config, viewer, world, since)
        if channel is None:
            raise ValueError("a brief from memory is of a world or of a channel")
        since = since or utcnow() - timedelta(days=self.config.simulation.brief_chat_days)
        return await from_memory.chat_brief(self.memory, self.config, viewer, channel, since)

    async def brief_state(self, sim_id: str) -> seed_store.BriefState | None:
        return await seed_store.state(self.db, sim_id)

    async def forget_in_briefs(self, forgotten: Forgotten) -> None:
        """Memory forgot something (``MemoryEngine.on_forget``): the lines of briefs resting on it go,
        and each brief's file is written again. A simulation whose run had read its brief (its
        documents were read, or its job is running) counts them as forgotten after the run."""
        for sim_id, lines in (await seed_store.touched_by(self.db, forgotten)).items():
            sim = await records.get(self.db, sim_id)
            if sim is None:
                continue
            job = await self.job_of(sim)
            read = (sim.folder / "documents.json").exists() or (job is not None and job.state == "running")
            await seed_store.drop_lines(self.db, sim_id, lines, read)
            if (brief := await seed_store.load(self.db, sim_id)) is not None:
                await run_cpu(seed_brief.write, brief, sim.folder)
            log.info("simulation %s: %s of its brief forgotten%s", sim_id,
                     in_english(len(lines), "{n} line", "{n} lines"), " after its run read it" if read else "")

    async def _recheck_brief(self, sim_id: str) -> None:
        """Before a pipeline reads its documents: drop the lines of a brief from memory that memory no
        longer holds (forgotten in another process, or between the check and the save)."""
        sim = await records.get(self.db, sim_id)
        brief = await seed_store.load(self.db, sim_id)
        if sim is None or brief is None or brief.origin != "memory" or "ontology" in await self.completed_steps(sim_id):
            return
        if stale := await from_memory.stale_lines(self.memory, sim.scope, brief):
            await seed_store.drop_lines(self.db, sim_id, stale, read=False)
            brief = await seed_store.load(self.db, sim_id)
            if brief is not None:
                await run_cpu(seed_brief.write, brief, sim.folder)
        if brief is None or not brief.messages:
            raise from_memory.NothingLeft(sim_id)

    # -- starting ---------------------------------------------------------------------------

    async def submit(self, sim_id: str, scope: str, channel: str | None, started_by: str) -> Job:
        """Start the pipeline job of a registered simulation."""
        job = await self.jobs.submit("simulation", {"sim_id": sim_id}, scope, channel=channel,
                                     title=_("simulation {sim}", sim=sim_id), started_by=started_by,
                                     weight=await self.weight(sim_id))
        await records.set_job(self.db, sim_id, job.id)
        return job

    async def fork(self, parent_id: str, from_round: int, **options: Any) -> Fork:
        """Register a fork of ``parent_id`` after round ``from_round`` (engine.sim.fork); ``submit`` runs it.
        An ensemble is forked through one of its runs (``pick_run``)."""
        return await fork_simulation(self.db, self.config, parent_id, from_round, **options)

    async def submit_report(self, sim_id: str, scope: str, channel: str | None, started_by: str) -> Job:
        return await self.jobs.submit("report", {"sim_id": sim_id}, scope, channel=channel,
                                      title=_("report {sim}", sim=sim_id), started_by=started_by)

    # -- reports --------------------------------------------------------------------------

    async def no_report_reason(self, sim: SimRecord) -> str | None:
        """Why the simulation can have no report (its run never finished), or None.

        Said at once instead of starting a report job that would fail the same way."""
        if "run" not in {name for name, _ in self.steps} or "run" in await self.completed_steps(sim.id):
            return None
        job = await self.job_of(sim)
        if job is None:
            return _("Simulation `{sim}` has no report: its run never took place.", sim=sim.id)
        how = (_("failed: {error}", error=job.error) if job.state == "failed"
               else _("was {state}", state=state_name(job.state)))
        hint = _(" /resume {job} continues it.", job=job.id) if job.resumable else ""
        return _("Simulation `{sim}` has no report: its run did not finish (job `{job}` {how}).", sim=sim.id,
                 job=job.id, how=how) + hint

    async def write_report(self, sim_id: str, job: str | None = None, scope: str | None = None,
                           progress=None) -> ReportResult:
        if self.llm is None:
            raise JobError(_("reports need an LLM: set [llm] base_url in config.toml"))
        return await make_report(self.db, self.config, self.llm, self.graph, self.runs, sim_id, memory=self.memory,
                                 job=job, scope=scope, progress=progress)

    async def ask_report(self, sim: SimRecord, question: str, *, scope: str, channel: str,
                         asked_by: str = "", may_interview: bool = True) -> chat.ReportAnswer:
        """A question to the simulation's report agent (report chat), its exchange kept for the channel;
        ``may_interview``: whether the asker may have its agents interviewed (/interview's rule)."""
        return await chat.ask_report(self.db, self.config, self.llm, self.graph, self.runs, sim.id, sim.folder,
                                     sim.requirement, question, memory=self.memory, scope=scope, channel=channel,
                                     asked_by=asked_by, may_interview=may_interview,
                                     ensemble=await self.ensemble(sim), lang=sim.spec.language)

    async def note_report_messages(self, sim_id: str, scope: str, channel: str, message_ids: list[str]) -> None:
        """The bot posted these messages about the simulation's report: a reply to one asks it."""
        await chat_store.remember_messages(self.db, scope, channel, sim_id, message_ids)

    async def forget_report_chat(self, scope: str, channel: str | None = None, asked_by: str | None = None,
                                 question: str | None = None) -> int:
        """/forget: the questions asked to report agents in the scope (channel, person, one question's
        text) and their answers."""
        return await chat_store.forget(self.db, scope, channel, asked_by, question)

    async def report_of_message(self, viewer: Viewer, message_id: str) -> str | None:
        """The simulation whose report message ``message_id`` is, or None (also when ``viewer``
        may not see that simulation: a reply from elsewhere to its report asks nothing)."""
        sim_id = await chat_store.sim_of_message(self.db, viewer.scope, message_id)
        return sim_id if sim_id is not None and await self.get(sim_id, viewer) is not None else None

    # -- exports and comparisons ----------------------------------------------------------------

    async def export(self, sim: SimRecord, out_dir: Path | None = None) -> ExportFiles:
        """Its exports (every run of an ensemble, with a run column)."""
        return await export_simulation(self.db, sim.id, sim.folder, out_dir or sim.folder / "export",
                                       await self.ran(sim))

    async def compare(self, a: SimRecord, b: SimRecord, job: str | None = None, scope: str | None = None,
                      progress=None) -> CompareResult:
        """Two simulations compared; an ensemble through its median-most run, with what both sides
        say as wholes (engine.sim.compare.ensembles)."""
        ea, eb = await self.ensemble(a), await self.ensemble(b)
        sides = None
        if ea is not None or eb is not None:
            sides = (await compare_ensembles.side(self.db, "A", a.id, ea),
                     await compare_ensembles.side(self.db, "B", b.id, eb))
        ra, rb = (e.representative if e is not None else s for e, s in ((ea, a), (eb, b)))
        return await compare_simulations(self.db, self.llm, (ra.id, ra.folder), (rb.id, rb.folder),
                                         self.config.data_dir / "compare" / f"{a.id}-vs-{b.id}", job=job,
                                         scope=scope, progress=progress, sides=sides, lang=a.spec.language)

    # -- outcomes (engine.sim.outcome) -----------------------------------------------------------

    async def record_outcome(self, sim: SimRecord, text: str, recorded_by: str) -> str:
        """Record what really happened (replacing an earlier outcome); ``score_outcome`` scores it."""
        return await outcomes.record(self.db, sim.id, text, recorded_by)

    async def score_outcome(self, sim: SimRecord, job: str | None = None, scope: str | None = None) -> outcomes.Scoring:
        if self.llm is None:
            raise JobError(NO_LLM)
        ensemble = await self.ensemble(sim, with_stats=False)
        return await outcomes.score(self.db, self.llm, sim, await self.ran(sim),
                                    confidence=english(ensemble.spread.confidence_line) if ensemble is not None else "",
                                    job=job, scope=scope)

    async def outcome(self, sim_id: str) -> outcomes.Outcome | None:
        return await outcomes.get(self.db, sim_id)

    async def track_record(self, viewer: Viewer) -> outcomes.TrackRecord:
        return await outcomes.track_record(self.db, viewer)

    async def scored_since(self, viewer: Viewer, since: str) -> list[tuple[str, str, float]]:
        return await outcomes.scored_since(self.db, viewer, since)

    # -- the graph to look at, the agents ---------------------------------------------------------

    async def draw_graph(self, sim: SimRecord) -> "GraphPicture":
        """The simulation's knowledge graph as ``graph/graph.png`` and ``graph/graph.html`` in its
        folder (engine.sim.graph.view); a JobError while step 2 has not built it."""
        if "graph" not in await self.completed_steps(sim.id) and not await self.graph.entities(sim.id):
            raise JobError(_("simulation {sim} has no knowledge graph yet: step 2 (graph) builds it. /sim status {sim} "
                             "shows its steps.", sim=sim.id))
        return await self.graph.draw(sim.id, sim.folder / "graph", _("Knowledge graph of simulation {sim}", sim=sim.id))

    async def agents(self, sim: SimRecord) -> list[roster.Agent] | None:
        """The simulation's agents with their latest stances (engine.sim.roster); None before step 3."""
        return await roster.roster(self.db, sim.id, sim.folder)

    # -- what-if ------------------------------------------------------------------------------

    async def inject(self, sim: SimRecord, text: str, **options) -> Injected:
        """Schedule an event in the simulation (options: round_no, platform, source, asked_by); in
        every run of an ensemble whose runs have started (before, the runs copy the head's events)."""
        members = await self.members(sim)
        if not members:
            return await inject_event(self.runs, sim.id, sim.folder, text, **options)
        done, refused = [], []
        for m in members:
            try:
                done.append(await inject_event(self.runs, m.id, m.folder, text, **options))
            except InjectRefused as err:
                refused.append(err)
        if not done:
            raise refused[0]
        return done[0]

    async def injections(self, sim: SimRecord) -> list[InjectionState]:
        members = await self.members(sim)
        return await run_cpu(injection_status, members[0].folder if members else sim.folder)

    # -- interviews ---------------------------------------------------------------------------

    async def interview(self, sim: SimRecord, agent_ids: list[int] | None, question: str,
                        platforms: list[str] | None, asked_by: str = "") -> list[Answer]:
        """Ask the run's agents (None: all); a finished run is reopened first. RunUnreachable when
        its agents cannot be asked."""
        return await self.runs.interview(sim.id, agent_ids, question, platforms, asked_by=asked_by)

    async def interview_in_character(self, folder: Path, agent_ids: list[int] | None, question: str,
                                     platform: str, scope: str, lang: str) -> list[PersonaAnswer]:
        """Answers role-played from the agents' personas (labelled ``PERSONA_LABEL``) in language
        ``lang`` (the simulation's), for when the run's agents cannot be asked."""
        if self.llm is None:
            raise JobError(_(NO_LLM))
        roster = await run_cpu(load_roster, folder)
        agents = [a for a in roster if (agent_ids is None or a.agent_id in agent_ids)
                  and (platform == "both" or platform in a.platforms)]
        return await PersonaInterviewer(self.llm, folder, scope=scope, lang=lang).interview(
            agents, question, platform)

    # -- jobs and life cycle ------------------------------------------------------------------

    def register_jobs(self) -> None:
        """Register the job kinds "simulation" and "report" on the job runner."""

        async def simulation(job: JobContext) -> dict[str, Any]:
            if self.llm is None:
                raise JobError(_(NO_LLM))
            await self._recheck_brief(job.params["sim_id"])
            handler = pipeline.job_handler(self.db, self.config, self.llm, self.embedder, self.graph, self.runs,
                                           self.steps, memory=self.memory)
            result = await handler(job)
            await job.progress(1.0, _("{calls}, {tokens} used", calls=plural(result["llm_calls"], "{n} LLM call",
                                                                              "{n} LLM calls"),
                                      tokens=plural(result["tokens"], "{n} token", "{n} tokens"))
                               + (f", ≈ ${result['cost_usd']:.2f}" if result["cost_usd"] else ""))
            return result

        async def report(job: JobContext) -> dict[str, Any]:
            sim_id = job.params["sim_id"]
            result = await self.write_report(sim_id, job=job.id, scope=job.job.scope, progress=job.progress)
            return {"sim_id": sim_id, "report": str(result.path), "tool_calls": result.tool_calls}

        s = self.config.simulation
        self.jobs.register("simulation", simulation, JobCaps(   # forks too: each runs a simulation
            s.max_active_per_scope, s.max_active_per_user, lambda n: plural(n, "{n} simulation", "{n} simulations"),
            ("[simulation] max_active_per_scope", "[simulation] max_active_per_user")))
        self.jobs.register("report", report)

    async def start(self) -> None:
        """Recover the runs a restart interrupted (they resume with their jobs)."""
        for sim_id in await self.runs.recover():
            log.warning("simulation run %s was interrupted by a restart", sim_id)

    async def close(self) -> None:
        await self.runs.executor.close()
        await self.runs.close()
