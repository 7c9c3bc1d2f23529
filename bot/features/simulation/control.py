"""``/sim stop <id>`` (at the end of the current round) and ``/sim resume <id>`` (the pipeline
job continues at its first unfinished step, the run after its last completed round). Both
belong to the person who started the simulation and to administrators."""
from __future__ import annotations

import asyncio

from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, sim_actions
from engine.sim.records import SimRecord


def setup(app) -> None:
    sims = simulations(app)

    async def stop(ctx: CommandContext, sim: SimRecord) -> None:
        runs = sims.runs
        if await runs.executor.attach(sim.id) is None:
            where = await runs.elsewhere(sim.id)
            raise UsageError(f"simulation {sim.id} runs in {where}; stop it there." if where
                             else f"simulation {sim.id} is not running.")
        task = asyncio.create_task(runs.stop(sim.id), name=f"stop-{sim.id}")
        app.background.add(task)
        task.add_done_callback(app.background.discard)
        await ctx.reply.send(f"Stopping simulation `{sim.id}` at the end of the current round. "
                             f"/sim resume {sim.id} continues it later.")

    async def resume(ctx: CommandContext, sim: SimRecord) -> None:
        job = await sims.job_of(sim)
        if job is None:
            raise UsageError(f"simulation {sim.id} has no job to resume.")
        if job.state == "done":
            raise UsageError(f"simulation {sim.id} has finished; there is nothing to resume.")
        await app.jobs.resume(job.id)
        state = await sims.run_state(sim.id)
        where = ""
        if state is not None and state.rounds_done:
            where = " The run continues after round " + ", ".join(
                f"{p} {k}" for p, k in sorted(state.rounds_done.items())) + " if its checkpoint is intact."
        await ctx.reply.send(f"Resuming simulation `{sim.id}` (job `{job.id}`); finished steps are skipped.{where}")

    actions = sim_actions(app)
    actions.add(SimAction("stop", "stop (at the end of the round)", stop, sim_starter_or_admin("id", "stop it")))
    actions.add(SimAction("resume", "resume", resume, sim_starter_or_admin("id", "resume it")))
