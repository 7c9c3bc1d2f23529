"""The running bot: configuration, storage, jobs and the features that register commands.

Adapters call ``handle`` for every incoming message; it dispatches commands and hands plain
messages to the listeners (memory ingestion). Features are modules with ``setup(app)``.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Any, Awaitable, Callable

from bot.commands.registry import Command, CommandContext, Registry, UsageError, parse_text_args
from bot.files import FileRetention
from bot.neutral import Incoming, Reply
from engine.config import Config
from engine.db import Database, open_database
from engine.jobs import Job, JobError, JobRunner

log = logging.getLogger(__name__)

# Feature modules, each with setup(app). Order is the order of /help groups.
FEATURES = [
    "bot.features.core",
    "bot.features.memory",
    "bot.features.llm",
    "bot.features.simulation",
    "bot.features.simrun",
    "bot.features.report",
    "bot.features.digest",
]

MessageListener = Callable[[Incoming], Awaitable[None]]
Hook = Callable[[], Awaitable[None]]
ReadyHook = Callable[[str], Awaitable[None]]


class App:
    def __init__(self, config: Config, db: Database):
        self.config = config
        self.db = db
        self.jobs = JobRunner(db, config.jobs.max_concurrent)
        self.commands = Registry()
        self.listeners: list[MessageListener] = []
        self.on_start: list[Hook] = []
        self.on_stop: list[Hook] = []
        self.on_ready: list[ReadyHook] = []  # fn(platform) once an adapter is connected
        self.interrupted: list[Job] = []
        self.services: dict[str, Any] = {}  # engine services features share (memory, llm, sims)
        self.outlets: dict[str, Callable[[str, str], Reply]] = {}  # platform -> (scope, channel) -> Reply
        self.background: set = set()  # tasks that follow jobs; kept so they are not collected
        self.jobs.subscribe(self._follow_new_jobs)
        # downloaded attachments and files written for upload: deleted after use and by age
        self.files = FileRetention(config.data_dir, config.bot.file_retention_hours, db)
        self.jobs.subscribe(self.files.on_job_event)
        self.on_start.append(self.files.start)
        self.on_stop.append(self.files.stop)

    @classmethod
    async def create(cls, config: Config, features: list[str] | None = None) -> "App":
        db = await open_database(config.db_path)
        app = cls(config, db)
        for name in FEATURES if features is None else features:
            importlib.import_module(name).setup(app)
        return app

    async def start(self) -> None:
        self.interrupted = await self.jobs.recover()
        for hook in self.on_start:
            await hook()

    def _follow_new_jobs(self, event) -> None:
        # Every job started for a chat channel gets a progress message there, on every platform.
        job = event.job
        if event.kind == "state" and job.state == "queued" and job.channel:
            reply = self.reply_to(job.scope, job.channel)
            if reply is not None:
                from bot.progress import start_following
                start_following(self, job, reply)

    async def platform_ready(self, platform: str) -> None:
        """Adapters call this once connected: interrupted jobs are announced, missed posts made."""
        await self.announce_interrupted(platform)
        for hook in self.on_ready:
            try:
                await hook(platform)
            except Exception:
                log.exception("ready hook failed for %s", platform)

    async def announce_interrupted(self, platform: str) -> None:
        """Tell each channel whose job a restart interrupted; adapters call this once connected."""
        for job in self.interrupted:
            if job.scope.split(":", 1)[0] == platform and job.channel:
                reply = self.reply_to(job.scope, job.channel)
                if reply is not None:
                    await reply.send(f"⚠ {job.title} (`{job.id}`) was interrupted by a restart. "
                                     f"/resume {job.id} continues it from its last checkpoint.")

    async def close(self) -> None:
        await self.jobs.shutdown()
        if self.background:
            await asyncio.wait(list(self.background), timeout=5)
        for hook in reversed(self.on_stop):
            try:
                await hook()
            except Exception:
                log.exception("shutdown hook failed")
        await self.db.close()

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        """A Reply that posts into ``channel`` of ``scope`` without a triggering message."""
        outlet = self.outlets.get(scope.split(":", 1)[0])
        return outlet(scope, channel) if outlet else None

    # -- settings ----------------------------------------------------------------------

    async def get_setting(self, scope: str, channel: str, key: str, default: str | None = None) -> str | None:
        return await self.db.fetchval(
            "SELECT value FROM channel_settings WHERE scope=? AND channel=? AND key=?",
            (scope, channel, key), default=default)

    async def set_setting(self, scope: str, channel: str, key: str, value: str) -> None:
        await self.db.execute(
            "INSERT INTO channel_settings(scope, channel, key, value) VALUES (?,?,?,?)"
            " ON CONFLICT(scope, channel, key) DO UPDATE SET value=excluded.value",
            (scope, channel, key, value))

    # -- dispatch ----------------------------------------------------------------------

    @staticmethod
    def split_command(text: str) -> tuple[str, str] | None:
        """'/name@botname args' -> ('name', 'args'); None for a plain message."""
        text = text.strip()
        if not text.startswith("/") or len(text) < 2:
            return None
        head, _, rest = text[1:].partition(" ")
        return head.split("@", 1)[0].lower(), rest.strip()

    async def handle(self, msg: Incoming, reply: Reply, files_from_text: bool = False) -> None:
        """Entry point for text-based adapters (console, Telegram)."""
        parsed = self.split_command(msg.text)
        if parsed is None:
            await self.ingest(msg)
            return
        name, rest = parsed
        command = self.commands.get(name)
        if command is None:
            await reply.error(f"unknown command /{name}. Type /help for the list.")
            return
        try:
            args = parse_text_args(command, rest, msg.attachments, files_from_text)
        except UsageError as err:
            await reply.error(str(err))
            await self.files.discard(a.path for a in msg.attachments)
            return
        await self.run_command(command, msg, args, reply)

    async def run_command(self, command: Command, msg: Incoming, args: dict[str, Any], reply: Reply) -> None:
        """Entry point for adapters that parse arguments themselves (Discord app commands)."""
        if command.permission == "admin" and not msg.is_admin:
            await reply.error(f"/{command.name} needs an administrator of this server or chat.")
            await self.files.discard(a.path for a in msg.attachments)
            return
        ctx = CommandContext(self, msg, args, reply)
        try:
            await command.handler(ctx)
        except (UsageError, JobError) as err:
            await reply.error(str(err))
        except Exception as err:
            log.exception("command /%s failed", command.name)
            await reply.error(f"/{command.name} failed: {type(err).__name__}. The error was logged.")
        finally:  # the command is over: its downloads go, unless a job or a /confirm needs them
            await self.files.discard(a.path for a in msg.attachments)

    async def ingest(self, msg: Incoming) -> None:
        if await self.get_setting(msg.scope, msg.channel, "memory", "on") == "off":
            return  # /settings memory off (or /memory off): this channel is not remembered
        for listener in self.listeners:
            try:
                await listener(msg)
            except Exception:
                log.exception("message listener failed")
