"""A bot process reduced to one simulation run (step 4), for tests that kill the bot with -9.

    python -m tests.helpers.sim_parent <database> <simulation folder> <LLM base url> <sim id>

It submits the run as a ``sim_run`` job in scope ``console:local``, prints the job id and
follows the run, recording its LLM usage, until it ends or the process is killed.
"""
from __future__ import annotations

import asyncio
import sys

from engine.config import LLMSection
from engine.db import open_database
from engine.jobs import JobRunner
from engine.llm.usage import UsageLedger
from engine.sim.run.accounting import RunUsage
from engine.sim.run.executor import LocalExecutor
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns


async def main(database: str, folder: str, base_url: str, sim_id: str) -> None:
    db = await open_database(database)
    ledger = UsageLedger(LLMSection(base_url=base_url, model="fake-model"), db)
    runs = SimRuns(db, LocalExecutor(), LLMTarget(base_url, "fake-model"),
                   RunSettings(idle_s=0.5, progress_interval_s=0.2), usage=RunUsage(db, ledger, "fake-model"))
    jobs = JobRunner(db)
    jobs.register("sim_run", runs.job)
    job = await jobs.submit("sim_run", {"sim_id": sim_id, "folder": folder}, scope="console:local")
    print(job.id, flush=True)
    await jobs.wait(job.id)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
