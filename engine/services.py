"""The engine's services, built once from a Config: the one place that assembles them.

``open_services(config)`` opens the database and builds what a process of the bot uses, each
handed what it needs: the process's owner (engine.owners: its lease on the jobs and runs it
holds), whom the operator trusts to spend (engine.trust), the job runner (engine.jobs: capped
per scope and person, the owners exempt), the embedder (one model per process, memory's and the
simulations'), the LLM client when ``[llm]`` names an endpoint (its budgets know the owners),
the memory engine (with that client: belief extraction and topic names) and the simulation
service (engine.sim.simulations, with its own run service, the client and the memory engine,
which holds each simulation's posts). The chat app (bot.app), the CLI (bot.cli) and the
benchmarks take them from here, as typed attributes of ``Services``; nothing else builds them.
``llm=False`` leaves the client out even where one is configured (the CLI's memory commands
leave belief extraction and LLM topic names to the bot); ``sims=False`` leaves the simulations
out (a process that only reads or writes memory).

The life cycle is defined here once. ``start`` registers the process's lease and recovers the
jobs a restart interrupted (returned, for the chat to announce), starts memory when the process
serves it (every scope's index rebuilt, unfinished belief extraction queued; ``warm``: a model
of the user's own loaded now, so a broken one stops the start, the packaged one loaded in the
background while the rest starts) and recovers the simulation runs a restart interrupted.
``close`` ends the jobs, the simulations' runs, memory, waits for the embedder's background
load, closes the LLM client last (memory and simulations still use it while they stop),
releases the lease and closes the database. Both may be called on services that were only
partly started: what never started has nothing to end.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import Config
from engine.db import Database, open_database
from engine.embedder import Embedder
from engine.jobs import Job, JobCaps, JobRunner
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.owners import ProcessOwner
from engine.sim.simulations import Simulations
from engine.trust import Trust


@dataclass
class Services:
    config: Config
    db: Database
    owner: ProcessOwner      # this process, as the owner of its jobs and runs (others may share the database)
    trust: Trust             # whom the operator trusts to spend: permissions, budgets and job caps ask it
    jobs: JobRunner
    embedder: Embedder
    memory: MemoryEngine
    llm: LLMClient | None = None       # None when no endpoint is configured (or llm=False)
    sims: Simulations | None = None    # None with sims=False

    async def start(self, *, jobs: bool = True, memory: bool = True, warm: bool = False) -> list[Job]:
        """Start what this process serves: ``jobs`` (its lease, the jobs and simulation runs a
        restart interrupted; the interrupted jobs are returned) and ``memory``."""
        interrupted: list[Job] = []
        if jobs:
            await self.owner.start()
            interrupted = await self.jobs.recover()
        if warm:
            await self.embedder.load_now_unless_packaged()
            self.embedder.warm()
        if memory:
            await self.memory.start()
        if jobs and self.sims is not None:
            await self.sims.start()
        return interrupted

    async def close(self) -> None:
        await self.jobs.shutdown()
        if self.sims is not None:
            await self.sims.close()
        await self.memory.close()
        await self.embedder.settle()
        if self.llm is not None:
            await self.llm.close()
        await self.owner.release()
        await self.db.close()


def build_services(config: Config, db: Database, *, llm: bool = True, sims: bool = True,
                   embedder: Embedder | None = None) -> Services:
    """The services on an open database (``embedder``: one to share, e.g. a benchmark's
    wrapped one; by default the one ``[embedder]`` describes)."""
    owner = ProcessOwner(db, config.jobs.lease_s)
    trust = Trust(config.bot)
    jobs = JobRunner(db, config.jobs.max_concurrent, owner,
                     JobCaps(config.jobs.max_pending_per_scope, config.jobs.max_pending_per_user),
                     exempt=trust.started_by_owner)
    embedder = embedder or Embedder.from_config(config.embedder)
    client = LLMClient(config.llm, db, trust=trust) if llm and config.llm.configured else None
    memory = MemoryEngine(db, embedder, config.memory, llm=client, owner=owner)
    services = Services(config, db, owner, trust, jobs, embedder, memory, client)
    if sims:
        services.sims = Simulations.build(config, db, jobs, owner, client, embedder, memory)
    return services


async def open_services(config: Config, *, llm: bool = True, sims: bool = True,
                        embedder: Embedder | None = None) -> Services:
    """Open the configured database and build the services on it (``build_services``)."""
    return build_services(config, await open_database(config.db_url, settings=config.database), llm=llm, sims=sims,
                          embedder=embedder)
