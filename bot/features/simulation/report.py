"""/report <sim>: the report of a simulation in the channel, as a short summary message, the
charts as images and the full report.md as a file. A report not yet written is written first,
as a background job (kind "report", engine.sim.simulations) that posts it when done. A
simulation job that finishes with its report step posts the report too.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import find_sim, simulations
from bot.features.simulation.export import post_exports
from bot.neutral import Reply
from engine.jobs import DONE
from engine.sim.report.agent import ReportResult, report_dir
from engine.sim.report.charts import TITLES
from engine.sim.simulations import ReportListener


async def post_report(reply: Reply, sim_id: str, folder: Path) -> None:
    out = report_dir(folder)
    summary = (out / "summary.txt").read_text(encoding="utf-8") if (out / "summary.txt").exists() else ""
    await reply.send(f"📊 Report of simulation `{sim_id}`\n{summary}".strip())
    for chart in sorted((out / "charts").glob("*.png")):
        await reply.upload(chart, caption=TITLES.get(chart.stem, chart.stem), image=True)
    await reply.upload(out / "report.md", caption=f"Full report of simulation {sim_id}")


def poster(app) -> ReportListener:
    """What a report job does once it has written the report: post it where it was asked for."""
    async def written(job, sim_id: str, result: ReportResult) -> None:
        reply = app.reply_to(job.job.scope, job.job.channel) if job.job.channel else None
        if reply is not None:
            await post_report(reply, sim_id, result.path.parent.parent)
    return written


def setup(app) -> None:
    sims = simulations(app)

    def post_after_pipeline(event) -> None:
        # A simulation whose pipeline ends with the report step gets it posted in its channel.
        job = event.job
        if (event.kind == "state" and job.kind == "simulation" and job.state == DONE and job.channel
                and "report" in (job.result or {}).get("steps", {})):
            reply = app.reply_to(job.scope, job.channel)
            if reply is not None:
                task = asyncio.ensure_future(post_report(reply, job.result["sim_id"], Path(job.result["folder"])))
                app.background.add(task)
                task.add_done_callback(app.background.discard)

    app.jobs.subscribe(post_after_pipeline)

    @app.commands.command("report", "Post the report of a simulation (writing it first if needed)", [
        Arg("sim", "simulation id"),
        Arg("action", "export: the trajectory (CSV, JSONL) and transcript as files", "choice", required=False,
            choices=("export",))], group="simulation")
    async def report(ctx: CommandContext) -> None:
        sim = await find_sim(ctx, ctx.args["sim"])
        if ctx.args.get("action") == "export":
            await post_exports(ctx, sim)
            return
        if (report_dir(sim.folder) / "report.md").exists():
            await post_report(ctx.reply, sim.id, sim.folder)
            return
        if sims.llm is None:
            raise UsageError("reports need an LLM: set [llm] base_url in config.toml")
        if pipeline_job := await sims.active_job(sim.id):
            # its last step writes the report, which is then posted in its channel
            await ctx.reply.send(f"Simulation `{sim.id}` is still under way (job `{pipeline_job}`); "
                                 "its report is written at the end and posted in its channel.")
            return
        if (why := await sims.no_report_reason(sim)) is not None:
            await ctx.reply.send(why)
            return
        if running := await sims.report_job(sim.id):
            await ctx.reply.send(f"The report of `{sim.id}` is being written (job `{running}`); "
                                 "it will be posted here.")
            return
        job = await sims.submit_report(sim.id, ctx.scope, ctx.message.channel, ctx.message.author_id)
        await ctx.reply.send(f"Writing the report of simulation `{sim.id}` (job `{job.id}`); "
                             "it will be posted here when done.")
