"""Who may act on a simulation, and finding the one a command names.

A command sees a simulation only where its channel's audience may read the simulation's
(``CommandContext.viewer``; engine.sim.records holds the rule, memory's): one of another server
or chat, or one started in a channel whose audience the asking channel's does not read, is as
unknown as a wrong id, refused with the same words, before any other check (the permission
rules below included) could tell it exists. Stopping, resuming and interviewing a simulation
belong to the person who started it and to administrators.
"""
from __future__ import annotations

from bot.commands.registry import CommandContext, UsageError
from bot.permissions import Permission, StarterOrAdmin
from engine.i18n import N_
from engine.sim.simulations import SimRecord, Simulations, not_here


def simulations(app) -> Simulations:
    """The process's simulation service (engine.services builds it with the app)."""
    return app.sims


def sim_starter_or_admin(arg: str, verb: str) -> Permission:
    """Only who started the simulation named by argument ``arg``, or an administrator (a simulation
    the asker may not see passes here and is refused as unknown by ``find_sim``)."""
    async def find(ctx: CommandContext) -> str | None:
        return await simulations(ctx.app).starter(str(ctx.args.get(arg, "")), ctx.viewer)
    return StarterOrAdmin(find, who=N_("the person who started this simulation"), verb=verb)   # verb: a msgid


async def find_sim(ctx: CommandContext, sim_id: str) -> SimRecord:
    """The simulation ``sim_id`` if this channel may see it; otherwise one line, the same whether
    it exists or not."""
    sim = await simulations(ctx.app).get(sim_id, ctx.viewer)
    if sim is None:
        raise UsageError(not_here(sim_id))
    return sim


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
