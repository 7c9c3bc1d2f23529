"""/compare <simA> <simB>: compare two futures (typically a parent and its fork, or two ensembles).

Both simulations must be of this server or chat and have run (at least one round logged);
naming the same one twice, an unknown one or one of another scope is one line. The comparison
is a background job of kind "compare" (engine.sim.compare.compare through ``Simulations.compare``),
with its progress in the channel; when done it posts a summary message, the overlay charts as
images and compare.md as a file. Anyone who may read the simulations may compare them, as
anyone may ask for their reports; the narrative's LLM use is counted against the job and the
scope and stops at their budgets like any other, and in a direct message only the bot's owners
may compare (bot.permissions ``costly``). A compare job counts among the jobs one scope and one
person may have queued or running ([jobs] max_pending_*). Either side may be an ensemble (its
median-most run is compared, and what both sides say as wholes, with their bands, comes first) or
one run of an ensemble, named by its own id.
"""
from __future__ import annotations

from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import find_sim, simulations
from bot.neutral import Reply
from bot.permissions import costly
from engine.i18n import N_, _
from engine.jobs import JobError
from engine.memory.audience import Viewer
from engine.sim.simulations import COMPARE_CHART_TITLES


async def post_comparison(reply: Reply, result: dict) -> None:
    await reply.send(result["summary"])
    for name, chart in result["charts"].items():
        await reply.upload(Path(chart), caption=_(COMPARE_CHART_TITLES.get(name, name)), image=True)
    await reply.upload(Path(result["path"]), caption=_("Comparison of {a} and {b}", a=result["a"], b=result["b"]))


def setup(app) -> None:
    sims = simulations(app)

    async def compare_job(job) -> dict:
        # /compare found both where it was asked: the job's channel may see them
        a, b = [await sims.get(job.params[key], Viewer.operator(job.job.scope)) for key in ("a", "b")]
        if a is None or b is None:
            raise JobError(_("simulation {sim} is gone", sim=job.params["a"] if a is None else job.params["b"]))
        result = await sims.compare(a, b, job=job.id, scope=job.job.scope, progress=job.progress)
        out = {"a": a.id, "b": b.id, "path": str(result.path), "summary": result.summary,
               "charts": {k: str(v) for k, v in result.charts.items()}, "unverified": result.unverified}
        reply = app.reply_to(job.job.scope, job.job.channel) if job.job.channel else None
        if reply is not None:
            await post_comparison(reply, out)
        return out

    app.jobs.register("compare", compare_job)

    # at most 100 characters: Discord's limit for a command's description
    @app.commands.command("compare", N_("Compare two futures (a parent and its fork): activity, beliefs, what "
                                     "differs, injected events"), [
        Arg("sim_a", N_("first simulation id (A)")), Arg("sim_b", N_("second simulation id (B)"))], group="simulation",
        permission=costly(app))
    async def compare(ctx: CommandContext) -> None:
        if ctx.args["sim_a"] == ctx.args["sim_b"]:
            raise UsageError(_("name two different simulations: a simulation compared with itself shows nothing."))
        a = await find_sim(ctx, ctx.args["sim_a"])
        b = await find_sim(ctx, ctx.args["sim_b"])
        for sim in (a, b):
            if not await sims.ran(sim):
                raise UsageError(_("simulation {sim} has not run yet: there is nothing to compare.", sim=sim.id))
        job = await app.jobs.submit("compare", {"a": a.id, "b": b.id}, ctx.scope, channel=ctx.message.channel,
                                    title=_("compare {a} {b}", a=a.id, b=b.id), started_by=ctx.message.author_id)
        narrative = "" if sims.llm is not None else _(" (no LLM is configured: without the narrative)")
        await ctx.reply.send(_("Comparing A `{a}` with B `{b}` (job `{job}`){narrative}; it will be posted here when "
                               "done.", a=a.id, b=b.id, job=job.id, narrative=narrative))
