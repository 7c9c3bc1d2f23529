"""``/sim fork <sim> --from-round K [--inject TEXT] [--rounds N]``: a new simulation from the
state after round K of another, running or finished.

The engine prepares the fork (``Simulations.fork``, engine.sim.fork: no LLM call); the handler
then submits its pipeline job, as /simulate does, so it runs steps 4-5 from round K+1 and its
progress follows in the channel where the fork was asked. The parent's starter or an
administrator may fork it; the fork's starter is who asked.
"""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, sim_actions
from engine.sim.records import SimRecord
from engine.words import plural

USAGE = "/sim fork <sim> --from-round K [--inject TEXT] [--rounds N]"
ARGS = [Arg("from_round", "fork: the completed round whose state the fork starts from", type="int",
            required=False, option=True),
        Arg("inject", "fork: an event published at the fork's first round", required=False, option=True),
        Arg("rounds", "fork: the fork's total rounds (default: the parent's)", type="int", required=False,
            option=True)]


def setup(app) -> None:
    sims = simulations(app)

    async def fork(ctx: CommandContext, sim: SimRecord) -> None:
        k = ctx.args.get("from_round")
        if k is None:
            raise UsageError(f"say which round to fork from. Usage: {USAGE}")
        msg = ctx.message
        made = await sims.fork(sim.id, k, rounds=ctx.args.get("rounds"), inject=ctx.args.get("inject"),
                               asked_by=msg.author_name or msg.author_id, scope=ctx.scope, channel=msg.channel)
        job = await sims.submit(made.sim_id, ctx.scope, msg.channel, msg.author_id)
        event = f"; at round {k + 1} the news reads: {made.event}" if made.event else ""
        await ctx.reply.send(f"Simulation `{made.sim_id}` ⑂ forked from `{sim.id}` after round {k} (job `{job.id}`): "
                             f"it shares its steps 1-3 and its first {plural(k, 'round')}, and runs rounds "
                             f"{k + 1}-{made.rounds}{event}. /sim status {made.sim_id} follows it.")

    sim_actions(app).add(SimAction("fork", "fork (from a round)", fork, sim_starter_or_admin("id", "fork it"),
                                   args=ARGS))
