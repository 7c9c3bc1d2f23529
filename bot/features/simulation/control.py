"""``/sim stop <id>`` (at the end of the current round) and ``/sim resume <id>`` (the pipeline
job continues at its first unfinished step, the run after its last completed round). Both
belong to the person who started the simulation and to administrators. An ensemble stops all
its runs (one of them, named by its own id, alone); its runs resume with it."""
from __future__ import annotations

import asyncio

from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, SimActions
from engine.i18n import N_, _
from engine.sim.simulations import SimRecord


def setup(app, actions: SimActions) -> None:
    sims = simulations(app)

    async def stop(ctx: CommandContext, sim: SimRecord) -> None:
        await sims.check_stoppable(sim)
        task = asyncio.create_task(sims.stop(sim), name=f"stop-{sim.id}")
        app.background.add(task)
        task.add_done_callback(app.background.discard)
        head = sim.ensemble_of or sim.id
        runs = _(" (every run)") if sim.runs > 1 else ""
        await ctx.reply.send(_("Stopping simulation `{sim}`{runs} at the end of the current round. /sim resume {head} "
                               "continues it later.", sim=sim.id, runs=runs, head=head))

    async def resume(ctx: CommandContext, sim: SimRecord) -> None:
        if sim.ensemble_of:
            raise UsageError(_("`{sim}` is run {run} of simulation {head}: its runs resume together, with /sim resume "
                               "{head}.", sim=sim.id, run=sim.run_no, head=sim.ensemble_of))
        job = await sims.job_of(sim)
        if job is None:
            raise UsageError(_("simulation {sim} has no job to resume.", sim=sim.id))
        if job.state == "done":
            raise UsageError(_("simulation {sim} has finished; there is nothing to resume.", sim=sim.id))
        await app.jobs.resume(job.id)
        state = await sims.run_state(sim.id)
        where = ""
        if state is not None and state.rounds_done:
            where = " " + _("The run continues after round {rounds} if its checkpoint is intact.", rounds=", ".join(
                f"{p} {k}" for p, k in sorted(state.rounds_done.items())))
        await ctx.reply.send(_("Resuming simulation `{sim}` (job `{job}`); finished steps are skipped.", sim=sim.id,
                               job=job.id) + where)

    actions.add(SimAction(N_("stop"), N_("stop (at the end of the round)"), stop,
                          sim_starter_or_admin("id", N_("stop it"))))
    actions.add(SimAction(N_("resume"), N_("resume"), resume, sim_starter_or_admin("id", N_("resume it"))))
