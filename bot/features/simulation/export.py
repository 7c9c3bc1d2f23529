"""/report <sim> export: the run's trajectory (CSV and JSONL) and its transcript (Markdown) as
files in the channel (engine.sim.report.export through ``Simulations.export``), written into
``<sim folder>/export/``; an ensemble's every run, with a run column. A simulation that has not
run yet has nothing to export: one line.
"""
from __future__ import annotations

from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import simulations
from engine.i18n import _
from engine.sim.simulations import SimRecord
from engine.words import plural


async def post_exports(ctx: CommandContext, sim: SimRecord) -> None:
    sims = simulations(ctx.app)
    ran = await sims.ran(sim)
    if not ran:
        raise UsageError(_("simulation {sim} has not run yet: there is nothing to export.", sim=sim.id))
    files = await sims.export(sim)
    runs = _(", {runs} (column run)", runs=plural(len(ran), "{n} run", "{n} runs")) if sim.runs > 1 else ""
    await ctx.reply.send(_("📤 Exports of simulation `{sim}`: the trajectory per round and platform ({rows}{runs}) as "
                           "CSV and JSONL, and the transcript of its posts and comments.", sim=sim.id,
                           rows=plural(files.rows, "{n} row", "{n} rows"), runs=runs))
    await ctx.reply.upload(files.csv, caption=_("Trajectory of {sim} (CSV)", sim=sim.id))
    await ctx.reply.upload(files.jsonl, caption=_("Trajectory of {sim} (JSONL)", sim=sim.id))
    await ctx.reply.upload(files.transcript, caption=_("Transcript of {sim}", sim=sim.id))
