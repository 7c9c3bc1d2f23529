"""``/sim fork <sim> --from-round K [--inject TEXT] [--rounds N] [--run R]``: a new simulation from
the state after round K of another, running or finished. An ensemble is forked from one of its
runs: ``--run R``, by default its median-most run, and the answer says which.

The engine prepares the fork (``Simulations.fork``, engine.sim.fork: no LLM call); the handler
then submits its pipeline job, as /simulate does, so it runs steps 4-5 from round K+1 and its
progress follows in the channel where the fork was asked. The parent's starter or an
administrator may fork it; the fork's starter is who asked. A fork's run spends on the LLM
(bot.permissions ``costly``), and it counts among the simulations one scope and one person may
have queued or running (checked before the fork is prepared).
"""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, SimActions
from bot.permissions import costly
from engine.i18n import N_, _
from engine.jobs import JobError
from engine.sim.simulations import SimRecord
from engine.words import plural

USAGE = "/sim fork <sim> --from-round K [--inject TEXT] [--rounds N] [--run R]"
ARGS = [Arg("from_round", N_("fork: the completed round whose state the fork starts from"), type="int",
            required=False, option=True),
        Arg("inject", N_("fork: an event published at the fork's first round"), required=False, option=True),
        Arg("rounds", N_("fork: the fork's total rounds (default: the parent's)"), type="int", required=False,
            option=True),
        Arg("run", N_("fork: which run of an ensemble (default: the median-most)"), type="int", required=False,
            option=True)]


def setup(app, actions: SimActions) -> None:
    sims = simulations(app)

    async def fork(ctx: CommandContext, sim: SimRecord) -> None:
        k = ctx.args.get("from_round")
        if k is None:
            raise UsageError(_("say which round to fork from. Usage: {usage}", usage=USAGE))
        msg = ctx.message
        await app.jobs.check_caps("simulation", ctx.scope, msg.author_id)
        try:
            parent, which = await sims.pick_run(sim, ctx.args.get("run"))
        except JobError as err:
            raise UsageError(str(err)) from None
        made = await sims.fork(parent.id, k, rounds=ctx.args.get("rounds"), inject=ctx.args.get("inject"),
                               asked_by=msg.author_name or msg.author_id, viewer=ctx.viewer, channel=msg.channel)
        job = await sims.submit(made.sim_id, ctx.scope, msg.channel, msg.author_id)
        event = _("; at round {round} the news reads: {event}", round=k + 1, event=made.event) if made.event else ""
        source = f"`{sim.id}`"
        if parent.id != sim.id:
            why = _(", {which}; --run K picks another", which=which) if which else ""
            source = _("run {run} of `{sim}` (`{id}`{why})", run=parent.run_no, sim=sim.id, id=parent.id, why=why)
        await ctx.reply.send(_("Simulation `{fork}` ⑂ forked from {source} after round {k} (job `{job}`): it shares "
                               "its steps 1-3 and its first {rounds}, and runs rounds {first}-{last}{event}. /sim "
                               "status {fork} follows it.", fork=made.sim_id, source=source, k=k, job=job.id,
                               rounds=plural(k, "{n} round", "{n} rounds"), first=k + 1, last=made.rounds,
                               event=event))

    actions.add(SimAction(N_("fork"), N_("fork (from a round)"), fork,
                          costly(app, sim_starter_or_admin("id", N_("fork it"))), args=ARGS))
