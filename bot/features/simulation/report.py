"""/report <sim>: the report of a simulation in the channel, as a short summary message, the charts
as images (the animated belief replay after the PNGs) and the full report.md as a file. A report not
yet written is written first, as a background job (kind "report", engine.sim.simulations); a
simulation job that finishes with its report step has written one too. Either, once done, gets
its report posted in its channel after its final note, by the one mechanism that posts finished
jobs' results (``App.result_posters``, bot.progress). The ids of the messages posted are kept: a
reply to one of them is a question to the report. ``/report <sim>
ask <question>`` asks the report agent (bot/features/simulation/reportchat.py), ``/report <sim>
export`` writes the run's exports (bot/features/simulation/export.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation import reportchat
from bot.features.simulation.access import find_sim, simulations
from bot.features.simulation.export import post_exports
from bot.neutral import Reply
from bot.permissions import Permission, costly
from bot.progress import ResultPoster
from engine.i18n import N_, _
from engine.jobs import Job
from engine.sim.simulations import REPORT_CHART_TITLES, report_dir


async def post_report(reply: Reply, sim_id: str, folder: Path) -> list[str]:
    """Post the report's summary, charts and file; the ids of the messages posted."""
    out = report_dir(folder)
    summary = (out / "summary.txt").read_text(encoding="utf-8") if (out / "summary.txt").exists() else ""
    sent = [await reply.send((_("📊 Report of simulation `{sim}`", sim=sim_id) + f"\n{summary}").strip())]
    charts = out / "charts"
    for chart in sorted(charts.glob("*.png")) + sorted(charts.glob("*.gif")):  # the belief replay after the PNGs
        sent.append(await reply.upload(chart, caption=_(REPORT_CHART_TITLES.get(chart.stem, chart.stem)), image=True))
    sent.append(await reply.upload(out / "report.md", caption=_("Full report of simulation {sim}", sim=sim_id)))
    return [s.message_id for s in sent]


async def share_report(app, reply: Reply, scope: str, channel: str, sim_id: str, folder: Path) -> None:
    """Post the report in a channel and remember its messages: a reply to one asks the report."""
    await simulations(app).note_report_messages(sim_id, scope, channel, await post_report(reply, sim_id, folder))


def poster(app) -> ResultPoster:
    """Post the report a done job wrote (a "report" job, or a "simulation" job whose pipeline
    ended with its report step) in the job's channel."""
    async def post(job: Job, reply: Reply) -> None:
        result = job.result or {}
        if job.kind == "simulation" and "report" not in result.get("steps", {}):
            return  # a pipeline cut short before its report
        sim = await simulations(app).get(result["sim_id"])
        if sim is not None and job.channel:
            await share_report(app, reply, job.scope, job.channel, sim.id, sim.folder)
    return post


def asking(args: dict) -> bool:
    """Whether /report's arguments ask the report agent: ``ask``, or a question without an action."""
    return args.get("action") == "ask" or (args.get("action") is None and bool(args.get("question")))


@dataclass(frozen=True, eq=False)
class WhenAsking(Permission):
    """/report's rule: posting or exporting a report is everyone's; asking its agent is ``rule``'s."""

    rule: Permission

    async def refuse(self, ctx: CommandContext, label: str) -> str | None:
        if not asking(ctx.args):
            return None
        return self.rule.refuse_early(ctx.message, f"{label} ask") or await self.rule.refuse(ctx, f"{label} ask")

    def describe(self) -> str:
        return _("ask: {who}; otherwise everyone", who=self.rule.describe())


def setup(app) -> None:
    sims = simulations(app)
    app.result_posters["report"] = app.result_posters["simulation"] = poster(app)

    calls, tokens = sims.report_question_cost()

    @app.commands.command("report", N_("Post a simulation's report (writing it first if needed), ask its report "
                          "agent, or export the run"), [
        Arg("sim", N_("simulation id")),
        Arg("action", N_("ask: a question to the report agent; export: the trajectory (CSV, JSONL) and transcript"),
            type="choice", choices=(N_("ask"), N_("export")), required=False),
        Arg("question", lambda: _("your question (each: about {calls} LLM calls, {tokens} tokens)", calls=calls,
                                  tokens=f"{tokens:,}"), type="text",
            required=False)], group="simulation", permission=WhenAsking(costly(app)))
    async def report(ctx: CommandContext) -> None:
        sim = await find_sim(ctx, ctx.args["sim"])
        if ctx.args.get("action") == "export":
            await post_exports(ctx, sim)
            return
        if asking(ctx.args):
            await reportchat.ask(ctx, sim)
            return
        if (report_dir(sim.folder) / "report.md").exists():
            await share_report(app, ctx.reply, ctx.scope, ctx.message.channel, sim.id, sim.folder)
            return
        if sims.llm is None:
            raise UsageError(_("reports need an LLM: set [llm] base_url in config.toml"))
        if pipeline_job := await sims.active_job(sim.id):
            # its last step writes the report, which is then posted in its channel
            await ctx.reply.send(_("Simulation `{sim}` is still under way (job `{job}`); its report is written at "
                                   "the end and posted in its channel.", sim=sim.id, job=pipeline_job))
            return
        if (why := await sims.no_report_reason(sim)) is not None:
            await ctx.reply.send(why)
            return
        if running := await sims.report_job(sim.id):
            await ctx.reply.send(_("The report of `{sim}` is being written (job `{job}`); it will be posted here.",
                                   sim=sim.id, job=running))
            return
        job = await sims.submit_report(sim.id, ctx.scope, ctx.message.channel, ctx.message.author_id)
        await ctx.reply.send(_("Writing the report of simulation `{sim}` (job `{job}`); it will be posted here when "
                               "done.", sim=sim.id, job=job.id))
