"""Shared by the chat tests: an app on a temporary data dir (``make_app``; ``serving``, started with
one real adapter for the length of a block), a small job command and an ``Outlet``,
the adapter for tests that only watch what the bot posts into channels; ``Person``, who types into
App.dispatch and gets the answer as text (``Collect``); ``RecordingReply``, the chat side as a
list of what the bot sent, uploaded and edited, and ``said``, a line typed at the console.

The ``testsim`` command registered here stands in for a long, file-consuming job: it reads
the attachment, reports progress twice and posts a report file into the job's channel.
"""
from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import AsyncIterator, Callable

from bot.adapters.base import Adapter, serve
from bot.app import App
from bot.commands.registry import Arg, CommandContext
from bot.neutral import Incoming, Reply, Sent
from bot.permissions import ADMIN
from engine.config import parse_config


class Outlet(Adapter):
    """A platform whose channel posts go to the Reply ``reply_for(scope, channel)`` gives."""

    def __init__(self, platform: str, reply_for: Callable[[str, str], Reply]):
        self.platform = platform  # type: ignore[misc]  # one test adapter class for any platform
        self.reply_for = reply_for

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        return self.reply_for(scope, channel)


async def make_app(tmp_path: Path, db_url: str | None = None, features: list[str] | None = None,
                   **sections) -> App:
    """An app on ``tmp_path/data`` with ``features`` (all of them when None); its database is
    ``db_url`` (conftest's fixture: SQLite or a fresh PostgreSQL database) or, without one, SQLite in
    the data folder."""
    data = {"jobs": {"progress_interval_s": 0}, **sections, "bot": {"data_dir": str(tmp_path / "data"),
                                                                  **sections.get("bot", {})}}
    if db_url is not None:
        data["database"] = {"url": db_url}
    app = await App.create(parse_config(data), features)
    return app


@contextlib.asynccontextmanager
async def serving(app: App, adapter: Callable[[App], Adapter], stop_within: float = 15) -> AsyncIterator[Adapter]:
    """``app`` started and serving the adapter ``adapter(app)`` makes, for the block; at its end the
    jobs are shut down, the adapter stops (within ``stop_within`` s) and the app closes."""
    await app.start()
    stop = asyncio.Event()
    added = app.adapters.add(adapter(app))
    task = asyncio.create_task(serve(added, stop))
    try:
        yield added
    finally:
        await app.jobs.shutdown()
        stop.set()
        await asyncio.wait_for(task, stop_within)
        await app.close()


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
        channel = app.reply_to(job.scope, job.channel or "")
        assert channel is not None  # the test's adapter answers for every channel
        await channel.upload(report, f"Report for {job.title}")
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


class Noted(Sent):
    async def edit(self, text: str) -> None:
        pass


class Collect(Reply):
    max_len = 100_000

    def __init__(self):
        self.texts: list[str] = []

    async def _send_one(self, text: str) -> Sent:
        self.texts.append(text)
        return Noted()

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        return Noted()


class Person:
    def __init__(self, app: App, name: str, admin: bool = False, channel: str = "general"):
        self.app, self.name, self.admin, self.channel = app, name, admin, channel
        self.n = 0

    async def say(self, text: str, channel: str | None = None) -> str:
        self.n += 1
        reply = Collect()
        msg = Incoming("console", "console:test", channel or self.channel, self.name, self.name, text,
                       message_id=f"{self.name}-{self.n}", is_admin=self.admin)
        await self.app.dispatch(msg, reply)
        return "\n".join(reply.texts)


class Recorded(Sent):
    def __init__(self, log: list, index: int):
        self.log, self.index = log, index

    async def edit(self, text: str) -> None:
        self.log.append(("edit", text))


class RecordingReply(Reply):
    """The chat side as a list: what the bot sent, uploaded and edited, in order."""

    def __init__(self):
        self.log: list[tuple] = []

    async def _send_one(self, text: str) -> Sent:
        self.log.append(("send", text))
        return Recorded(self.log, len(self.log))

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        self.log.append(("image" if image else "file", Path(path), caption))
        return Recorded(self.log, len(self.log))

    def of(self, kind: str) -> list[tuple]:
        return [entry for entry in self.log if entry[0] == kind]

    def sent(self) -> str:
        """The texts the bot sent, one message a line."""
        return "\n".join(entry[1] for entry in self.of("send"))


def said(text: str) -> Incoming:
    return Incoming("console", "console:local", "console", "u1", "user", text)
