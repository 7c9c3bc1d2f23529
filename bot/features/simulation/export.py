"""/report <sim> export: the run's trajectory (CSV and JSONL) and its transcript (Markdown) as
files in the channel (engine.sim.export through ``Simulations.export``), written into
``<sim folder>/export/``. A simulation that has not run yet has nothing to export: one line.
"""
from __future__ import annotations

from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import simulations
from engine.sim.records import SimRecord
from engine.sim.report.stats import platforms_of
from engine.words import plural


async def post_exports(ctx: CommandContext, sim: SimRecord) -> None:
    if not platforms_of(sim.folder):
        raise UsageError(f"simulation {sim.id} has not run yet: there is nothing to export.")
    files = await simulations(ctx.app).export(sim)
    await ctx.reply.send(f"📤 Exports of simulation `{sim.id}`: the trajectory per round and platform "
                         f"({plural(files.rows, 'row')}) as CSV and JSONL, and the transcript of its posts "
                         "and comments.")
    await ctx.reply.upload(files.csv, caption=f"Trajectory of {sim.id} (CSV)")
    await ctx.reply.upload(files.jsonl, caption=f"Trajectory of {sim.id} (JSONL)")
    await ctx.reply.upload(files.transcript, caption=f"Transcript of {sim.id}")
