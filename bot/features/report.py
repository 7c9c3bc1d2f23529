"""/report <sim>: the report of a simulation in the channel, as a short summary message, the
charts as images and the full report.md as a file. A report not yet written is written first,
as a background job (kind "report") that posts it when done. A simulation job that finishes
with its report step posts the report too. The ids of the messages posted are kept: a reply to
one of them is a question to the report. ``/report <sim> ask <question>`` asks the report agent
(bot/features/report_chat.py).
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features import report_chat
from bot.neutral import Reply
from engine.jobs import DONE, JobError
from engine.sim import pipeline
from engine.sim.estimate import report_question
from engine.sim.report.agent import report_dir
from engine.sim.report.charts import TITLES
from engine.sim.report import chat_store
from engine.sim.report import step as report_step


async def post_report(db, reply: Reply, scope: str, channel: str, sim_id: str, folder: Path) -> None:
    out = report_dir(folder)
    summary = (out / "summary.txt").read_text(encoding="utf-8") if (out / "summary.txt").exists() else ""
    sent = [await reply.send(f"📊 Report of simulation `{sim_id}`\n{summary}".strip())]
    for chart in sorted((out / "charts").glob("*.png")):
        sent.append(await reply.upload(chart, caption=TITLES.get(chart.stem, chart.stem), image=True))
    sent.append(await reply.upload(out / "report.md", caption=f"Full report of simulation {sim_id}"))
    await chat_store.remember_messages(db, scope, channel, sim_id, [s.message_id for s in sent])


async def no_report_reason(app, sim_id: str) -> str | None:
    """Why simulation ``sim_id`` can have no report (its run never finished), or None.

    Said at once instead of starting a report job that would fail the same way."""
    if "run" not in [name for name, _ in pipeline.STEPS]:
        return None
    if "run" in await pipeline.completed_steps(app.db, sim_id):
        return None
    job_id = await app.db.fetchval("SELECT job_id FROM simulations WHERE id=?", (sim_id,))
    job = await app.jobs.get(job_id) if job_id else None
    if job is None:
        return f"Simulation `{sim_id}` has no report: its run never took place."
    how = f"failed: {job.error}" if job.state == "failed" else f"was {job.state}"
    hint = f" /resume {job.id} continues it." if job.resumable else ""
    return f"Simulation `{sim_id}` has no report: its run did not finish (job `{job.id}` {how}).{hint}"


def setup(app) -> None:
    report_step.register()
    report_chat.setup(app)
    reg = app.commands

    async def folder_of(sim_id: str, scope: str) -> Path | None:
        folder = await app.db.fetchval("SELECT folder FROM simulations WHERE id=? AND scope=?", (sim_id, scope))
        return Path(folder) if folder else None

    async def write_and_post(job) -> dict:
        llm, store = app.services.get("llm"), app.services.get("sim_graph")
        if llm is None or store is None:
            raise JobError("reports need an LLM: set [llm] base_url in config.toml")
        sim_id = job.params["sim_id"]
        result = await report_step.make_report(app.db, app.config, llm, store, sim_id, job=job.id, scope=job.job.scope,
                                   progress=job.progress)
        reply = app.reply_to(job.job.scope, job.job.channel) if job.job.channel else None
        if reply is not None:
            await post_report(app.db, reply, job.job.scope, job.job.channel, sim_id, result.path.parent.parent)
        return {"sim_id": sim_id, "report": str(result.path), "tool_calls": result.tool_calls}

    app.jobs.register("report", write_and_post)

    def post_after_pipeline(event) -> None:
        # A simulation whose pipeline ends with the report step gets it posted in its channel.
        job = event.job
        if (event.kind == "state" and job.kind == "simulation" and job.state == DONE and job.channel
                and "report" in (job.result or {}).get("steps", {})):
            reply = app.reply_to(job.scope, job.channel)
            if reply is not None:
                task = asyncio.ensure_future(post_report(app.db, reply, job.scope, job.channel, job.result["sim_id"],
                                                         Path(job.result["folder"])))
                app.background.add(task)
                task.add_done_callback(app.background.discard)

    app.jobs.subscribe(post_after_pipeline)

    calls, tokens = report_question(app.config)

    @reg.command("report", "Post the report of a simulation (writing it first if needed), or ask its "
                 "report agent a question", [
        Arg("sim", "simulation id"),
        Arg("action", "ask: a question to the report agent", type="choice", choices=("ask",), required=False),
        Arg("question", f"your question (each: about {calls} LLM calls, {tokens:,} tokens)", type="text",
            required=False)], group="simulation")
    async def report(ctx: CommandContext) -> None:
        sim_id = ctx.args["sim"]
        folder = await folder_of(sim_id, ctx.scope)
        if folder is None:
            raise UsageError(f"no simulation {sim_id} here. /sims lists them.")
        if ctx.args.get("action") == "ask" or ctx.args.get("question"):
            await report_chat.ask(app, ctx, sim_id, folder)
            return
        if (report_dir(folder) / "report.md").exists():
            await post_report(app.db, ctx.reply, ctx.scope, ctx.message.channel, sim_id, folder)
            return
        if "llm" not in app.services:
            raise UsageError("reports need an LLM: set [llm] base_url in config.toml")
        pipeline_job = await app.db.fetchval(
            "SELECT j.id FROM simulations s JOIN jobs j ON j.id = s.job_id"
            " WHERE s.id = ? AND j.state IN ('queued','running')", (sim_id,))
        if pipeline_job:   # its last step writes the report, which is then posted in its channel
            await ctx.reply.send(f"Simulation `{sim_id}` is still under way (job `{pipeline_job}`); "
                                 "its report is written at the end and posted in its channel.")
            return
        if (why := await no_report_reason(app, sim_id)) is not None:
            await ctx.reply.send(why)
            return
        running = await app.db.fetchval(
            "SELECT id FROM jobs WHERE kind='report' AND state IN ('queued','running')"
            " AND json_extract(params, '$.sim_id') = ?", (sim_id,))
        if running:
            await ctx.reply.send(f"The report of `{sim_id}` is being written (job `{running}`); "
                                 "it will be posted here.")
            return
        job = await app.jobs.submit("report", {"sim_id": sim_id}, ctx.scope, channel=ctx.message.channel,
                                    title=f"report {sim_id}", started_by=ctx.message.author_id)
        await ctx.reply.send(f"Writing the report of simulation `{sim_id}` (job `{job.id}`); "
                             "it will be posted here when done.")
