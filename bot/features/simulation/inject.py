"""``/sim inject <sim> <text> [--round N] [--platform twitter|reddit|both] [--as NAME]``: publish an
event in a simulation at the start of a round (default: the next one not begun), before its run
or while it runs. The simulation's starter or an administrator only; bad input is one line.
The engine side is ``engine.sim.inject`` (through ``Simulations.inject``).
"""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, sim_actions
from engine.sim.inject import InjectRefused
from engine.sim.records import SimRecord

ARGS = [
    Arg("text", "inject: the event, as its source posts it", type="text", required=False),
    Arg("round", "inject: the round it goes out in (default: the next one)", type="int", required=False,
        option=True),
    Arg("platform", "inject: twitter, reddit or both (default both)", type="choice",
        choices=("twitter", "reddit", "both"), required=False, option=True),
    Arg("as", "inject: the account that posts it (default News Desk)", required=False, option=True),
]


def setup(app) -> None:
    sims = simulations(app)

    async def inject(ctx: CommandContext, sim: SimRecord) -> None:
        try:
            done = await sims.inject(sim, ctx.args.get("text") or "", round_no=ctx.args.get("round"),
                                     platform=ctx.args.get("platform") or "both", source=ctx.args.get("as"),
                                     asked_by=ctx.message.author_name or ctx.message.author_id)
        except InjectRefused as err:
            raise UsageError(str(err)) from None
        e = done.injection
        text = (f"📰 Scheduled for the start of round {e.round} on {' and '.join(e.platforms)}: {e.source} posts "
                f"“{e.text}” (event `{e.id}`). /sim status {sim.id} shows when it goes out.")
        if done.late_on:
            text += (f"\nRound {e.round} had already begun on {' and '.join(done.late_on)}: "
                     f"it goes out there at the start of round {e.round + 1}.")
        await ctx.reply.send(text)

    sim_actions(app).add(SimAction("inject", "inject (an event)", inject,
                                   sim_starter_or_admin("id", "inject events into it"), ARGS))
