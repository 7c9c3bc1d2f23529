"""``/sim inject <sim> <text> [--round N] [--platform twitter|reddit|both] [--as NAME]``: publish an
event in a simulation at the start of a round (default: the next one not begun), before its run
or while it runs. The simulation's starter or an administrator only; bad input is one line.
The engine side is ``engine.sim.inject.request`` (through ``Simulations.inject``).
"""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, SimActions
from engine.i18n import N_, _
from engine.sim.simulations import InjectRefused, SimRecord

ARGS = [
    Arg("text", N_("inject: the event, as its source posts it"), type="text", required=False),
    Arg("round", N_("inject: the round it goes out in (default: the next one)"), type="int", required=False,
        option=True),
    Arg("platform", N_("inject: twitter, reddit or both (default both)"), type="choice",
        choices=(N_("twitter"), N_("reddit"), N_("both")), required=False, option=True),
    Arg("as", N_("inject: the account that posts it (default News Desk)"), required=False, option=True),
]


def setup(app, actions: SimActions) -> None:
    sims = simulations(app)

    async def inject(ctx: CommandContext, sim: SimRecord) -> None:
        try:
            done = await sims.inject(sim, ctx.args.get("text") or "", round_no=ctx.args.get("round"),
                                     platform=ctx.args.get("platform") or "both", source=ctx.args.get("as"),
                                     asked_by=ctx.message.author_name or ctx.message.author_id)
        except InjectRefused as err:
            raise UsageError(str(err)) from None
        e = done.injection
        text = _("📰 Scheduled for the start of round {round} on {platforms}: {source} posts “{text}” (event "
                 "`{event}`). /sim status {sim} shows when it goes out.", round=e.round,
                 platforms=_(" and ").join(e.platforms), source=e.source, text=e.text, event=e.id, sim=sim.id)
        if done.late_on:
            text += "\n" + _("Round {round} had already begun on {platforms}: it goes out there at the start of "
                             "round {next}.", round=e.round, platforms=_(" and ").join(done.late_on), next=e.round + 1)
        await ctx.reply.send(text)

    actions.add(SimAction(N_("inject"), N_("inject (an event)"), inject,
                          sim_starter_or_admin("id", N_("inject events into it")), ARGS))
