"""Step 4 of the simulation pipeline ("run"): the prepared environment runs on camel-oasis.

The step uses the ``SimRuns`` service it is given (``ctx.runs``), the one the bot process or the
CLI built with ``make_runs``, so the chat commands that stop, resume or interview a run reach
the same live process. There is one such service per process; whoever needs it is handed it.
A simulation of several runs (``--runs N``) runs them all here (engine.sim.ensemble.run).
"""
from __future__ import annotations

from engine.config import Config
from engine.db import Database
from engine.i18n import _
from engine.jobs import JobError
from engine.llm.usage import UsageLedger
from engine.owners import ProcessOwner
from engine.sim.context import SimContext
from engine.sim.ensemble import run as ensemble_run
from engine.sim.run.accounting import RunUsage
from engine.sim.run.executor import Executor, make_executor
from engine.sim.run.observers import RoundObserver
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns, run_summary
from engine.sim.stance import tracking as stance


def settings_from(config: Config) -> RunSettings:
    s = config.simulation
    return RunSettings(max_rounds=s.max_rounds, idle_s=s.run_idle_s, stop_timeout_s=s.run_stop_timeout_s,
                       interview_timeout_s=s.interview_timeout_s, memory_rounds=s.agent_memory_rounds,
                       max_steps_per_round=s.max_steps_per_round, follow_density=s.follow_density,
                       llm_concurrency=s.run_llm_concurrency, context_tokens=s.agent_context_tokens,
                       fork_points_mb=s.fork_points_mb,
                       progress_interval_s=config.jobs.progress_interval_s, lost_restarts=s.run_lost_restarts)


def make_runs(db: Database, config: Config, owner: ProcessOwner | None = None, ledger: UsageLedger | None = None,
              executor: Executor | None = None, observers: list[RoundObserver] | None = None,
              llm=None) -> SimRuns:
    """The run service of one process (with the process's ``owner`` when given). Runs record
    their LLM usage in ``ledger``, the shared LLM client's, so its budget checks see it. Given
    that client (``llm``), the service also tracks beliefs per round (``engine.sim.stance.tracking``)
    unless ``[simulation] track_stances`` is false."""
    target = LLMTarget(config.llm.base_url, config.llm.model, config.llm.api_key_env, config.llm.timeout_s)
    usage = RunUsage(db, ledger or UsageLedger(config.llm, db), config.llm.model)
    observers = list(observers or [])
    if llm is not None and config.simulation.track_stances:
        observers.append(stance.observer(db, llm, config.simulation.stance_batch))
    return SimRuns(db, executor or make_executor(config.simulation), target, settings_from(config), owner, usage,
                   observers)


async def step(ctx: SimContext) -> dict:
    if ctx.runs is None:
        raise JobError(_("simulation runs are not enabled in this process"))

    if (runs := ctx.spec.runs or 1) > 1:
        return await ensemble_run.run_all(ctx, runs)

    async def progress(fraction, message, **data) -> None:
        await ctx.progress(fraction, message)

    result = await ctx.runs.run(ctx.sim_id, ctx.folder, progress, job_id=ctx.job_id, scope=ctx.scope)
    return run_summary(result)
