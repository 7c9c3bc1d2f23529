"""Who may act on a simulation, and finding the one a command names.

Stopping, resuming and interviewing a simulation belong to the person who started it and to
administrators; a simulation id from another server or chat is as unknown as a wrong one.
"""
from __future__ import annotations

from bot.commands.registry import CommandContext, UsageError
from bot.permissions import Permission, StarterOrAdmin
from engine.sim.records import SimRecord
from engine.sim.simulations import Simulations


def simulations(app) -> Simulations:
    """The process's simulation service (set up by bot.features.simulation)."""
    if app.sims is None:
        raise UsageError("simulations are not enabled in this bot")
    return app.sims


def sim_starter_or_admin(arg: str, verb: str) -> Permission:
    """Only who started the simulation named by argument ``arg``, or an administrator."""
    async def find(ctx: CommandContext) -> str | None:
        return await simulations(ctx.app).starter(str(ctx.args.get(arg, "")), ctx.scope)
    return StarterOrAdmin(find, who="the person who started this simulation", verb=verb)


async def find_sim(ctx: CommandContext, sim_id: str) -> SimRecord:
    sim = await simulations(ctx.app).get(sim_id, ctx.scope)
    if sim is None:
        raise UsageError(f"no simulation {sim_id} here. /sims lists them.")
    return sim


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
