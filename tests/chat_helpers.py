"""Shared by the chat adapter tests: an app on a temporary data dir and a small job command.

The ``testsim`` command registered here stands in for a long, file-consuming job: it reads
the attachment, reports progress twice and posts a report file into the job's channel.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from bot.app import App
from bot.commands.registry import Arg, CommandContext
from engine.config import parse_config


async def make_app(tmp_path: Path, **sections) -> App:
    data = {"bot": {"data_dir": str(tmp_path / "data")}, "jobs": {"progress_interval_s": 0}, **sections}
    app = await App.create(parse_config(data))
    return app


def add_test_simulation(app: App, gate: asyncio.Event | None = None) -> list[dict]:
    """Register /testsim (attachment + requirement) backed by a 'simulation' job; returns the
    list that records what each run read."""
    runs: list[dict] = []

    async def job(ctx) -> dict:
        text = Path(ctx.params["path"]).read_text()
        runs.append({"text": text, "requirement": ctx.params["requirement"]})
        await ctx.progress(0.25, "building the graph")
        if gate is not None:
            await gate.wait()
        await ctx.progress(0.75, "simulating round 3 of 4")
        job = ctx.job
        report = Path(ctx.params["path"]).with_name(f"report-{job.id}.md")
        report.write_text(f"# Report\n{ctx.params['requirement']}\n{text}\n")
        await app.reply_to(job.scope, job.channel).upload(report, f"Report for {job.title}")
        return {"report_path": str(report)}

    app.jobs.register("simulation", job)

    @app.commands.command("testsim", "Simulate how the events in a document unfold", [
        Arg("document", "the document", type="attachment"),
        Arg("requirement", "what to predict", type="text"),
        Arg("rounds", "rounds to simulate", type="int", required=False, option=True),
    ], permission="admin", group="simulation")
    async def testsim(ctx: CommandContext) -> None:
        doc = ctx.args["document"]
        job = await ctx.app.jobs.submit("simulation", {"path": str(doc.path), "requirement": ctx.args["requirement"]},
                                        ctx.scope, ctx.message.channel, title=f"simulation of {doc.filename}")
        await ctx.reply.send(f"Started `{job.id}`.")

    return runs
