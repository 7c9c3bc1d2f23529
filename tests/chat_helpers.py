"""Shared by the chat adapter tests: an app on a temporary data dir, a small job command and
an ``Outlet``, the adapter for tests that only watch what the bot posts into channels.

The ``testsim`` command registered here stands in for a long, file-consuming job: it reads
the attachment, reports progress twice and posts a report file into the job's channel.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

from bot.adapters.base import Adapter
from bot.app import App
from bot.commands.registry import Arg, CommandContext
from bot.neutral import Reply
from bot.permissions import ADMIN
from engine.config import parse_config


class Outlet(Adapter):
    """A platform whose channel posts go to the Reply ``reply_for(scope, channel)`` gives."""

    def __init__(self, platform: str, reply_for: Callable[[str, str], Reply]):
        self.platform = platform
        self.reply_for = reply_for

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        return self.reply_for(scope, channel)


async def make_app(tmp_path: Path, db_url: str | None = None, **sections) -> App:
    """An app on ``tmp_path/data``; its database is ``db_url`` (conftest's fixture: SQLite or a fresh
    PostgreSQL database) or, without one, SQLite in the data folder."""
    data = {"bot": {"data_dir": str(tmp_path / "data")}, "jobs": {"progress_interval_s": 0}, **sections}
    if db_url is not None:
        data["database"] = {"url": db_url}
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
    ], permission=ADMIN, group="simulation")
    async def testsim(ctx: CommandContext) -> None:
        doc = ctx.args["document"]
        job = await ctx.app.jobs.submit("simulation", {"path": str(doc.path), "requirement": ctx.args["requirement"]},
                                        ctx.scope, ctx.message.channel, title=f"simulation of {doc.filename}",
                                        started_by=ctx.message.author_id)
        await ctx.reply.send(f"Started `{job.id}`.")

    return runs


def add_hold_job(app: App) -> asyncio.Event:
    """Register /hold, which any member may use: it starts a job that runs until the returned
    event is set (or it is cancelled)."""
    release = asyncio.Event()

    async def job(ctx) -> dict:
        await ctx.progress(0.5, "holding")
        await release.wait()
        return {}

    app.jobs.register("hold", job)

    @app.commands.command("hold", "Start a job that holds until released", group="jobs")
    async def hold(ctx: CommandContext) -> None:
        job = await ctx.app.jobs.submit("hold", {}, ctx.scope, ctx.message.channel, title="hold",
                                        started_by=ctx.message.author_id)
        await ctx.reply.send(f"Holding `{job.id}`.")

    return release
