"""Step 4 of the simulation pipeline ("run"): the prepared environment runs on camel-oasis.

``register()`` appends the step to ``engine.sim.pipeline.STEPS`` (once per process). The step
uses the ``SimRuns`` service of its database (``runs_for``), so the chat commands that stop,
resume or interview a run reach the same live process.
"""
from __future__ import annotations

import weakref

from engine.config import Config
from engine.db import Database
from engine.owners import ProcessOwner
from engine.llm.usage import UsageLedger
from engine.sim import pipeline
from engine.sim.run.accounting import RunUsage
from engine.sim.run.executor import make_executor
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns

_services: "weakref.WeakKeyDictionary[Database, SimRuns]" = weakref.WeakKeyDictionary()


def settings_from(config: Config) -> RunSettings:
    s = config.simulation
    return RunSettings(max_rounds=s.max_rounds, idle_s=s.run_idle_s, stop_timeout_s=s.run_stop_timeout_s,
                       interview_timeout_s=s.interview_timeout_s, memory_rounds=s.agent_memory_rounds,
                       max_steps_per_round=s.max_steps_per_round, follow_density=s.follow_density,
                       llm_concurrency=s.run_llm_concurrency, context_tokens=s.agent_context_tokens,
                       progress_interval_s=config.jobs.progress_interval_s, lost_restarts=s.run_lost_restarts)


def runs_for(db: Database, config: Config, owner: ProcessOwner | None = None,
             ledger: UsageLedger | None = None) -> SimRuns:
    """The run service of this database (one per bot process, created on first use, with the
    process's ``owner`` when given). Runs record their LLM usage in ``ledger``, the shared LLM
    client's, so its budget checks see it."""
    runs = _services.get(db)
    if runs is None:
        llm = LLMTarget(config.llm.base_url, config.llm.model, config.llm.api_key_env, config.llm.timeout_s)
        usage = RunUsage(db, ledger or UsageLedger(config.llm, db), config.llm.model)
        runs = _services[db] = SimRuns(db, make_executor(config.simulation), llm, settings_from(config), owner, usage)
    return runs


async def step(ctx: pipeline.SimContext) -> dict:
    runs = runs_for(ctx.db, ctx.config, ledger=ctx.llm.usage)

    async def progress(fraction, message, **data) -> None:
        await ctx.progress(fraction, message)

    result = await runs.run(ctx.sim_id, ctx.folder, progress, job_id=ctx.job_id, scope=ctx.scope)
    summary = {"rounds": result["rounds"], "actions": sum(result["actions"].values())}
    summary.update({f"{p} actions": n for p, n in sorted(result["actions"].items())})
    if result["restart_reason"]:
        summary["restart"] = result["restart_reason"]
    return summary


def register() -> None:
    if not any(name == "run" for name, _ in pipeline.STEPS):
        pipeline.add_step("run", step)
