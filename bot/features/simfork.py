"""``/sim fork <sim> --from-round K [--inject TEXT] [--rounds N]``: a new simulation from the
state after round K of another (an action of ``/sim``, defined in bot.features.simulation).

The engine prepares the fork (engine.sim.fork: no LLM call); this handler then submits it as a
job of kind "simulation", as /simulate does, so it runs steps 4-5 from round K+1 and its progress
follows in the channel where the fork was asked. The parent's starter or an administrator may
fork it; the fork's starter is who asked.
"""
from __future__ import annotations

from bot.commands.registry import CommandContext, UsageError
from engine.sim.fork import fork_simulation
from engine.words import plural

FORK_OPTIONS = ("from_round", "inject", "rounds")
USAGE = "/sim fork <sim> --from-round K [--inject TEXT] [--rounds N]"


async def sim_fork(app, ctx: CommandContext, row) -> None:
    k = ctx.args.get("from_round")
    if k is None:
        raise UsageError(f"say which round to fork from. Usage: {USAGE}")
    msg = ctx.message
    fork = await fork_simulation(app.db, app.config, row["id"], k, rounds=ctx.args.get("rounds"),
                                 inject=ctx.args.get("inject"), asked_by=msg.author_name or msg.author_id,
                                 scope=ctx.scope, channel=msg.channel)
    job = await app.jobs.submit("simulation", {"sim_id": fork.sim_id}, ctx.scope, channel=msg.channel,
                                title=f"simulation {fork.sim_id}", started_by=msg.author_id)
    await app.db.execute("UPDATE simulations SET job_id=? WHERE id=?", (job.id, fork.sim_id))
    event = f"; at round {k + 1} the news reads: {fork.event}" if fork.event else ""
    await ctx.reply.send(f"Simulation `{fork.sim_id}` ⑂ forked from `{row['id']}` after round {k} (job `{job.id}`): "
                         f"it shares its steps 1-3 and its first {plural(k, 'round')}, and runs rounds "
                         f"{k + 1}-{fork.rounds}{event}. /sim status {fork.sim_id} follows it.")
