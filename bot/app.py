"""The running bot: configuration, storage, jobs and the features that register commands.

Every adapter hands each incoming message to ``dispatch``: it decides command or plain
message, enforces the command's permission rule (bot.permissions) before arguments are parsed
or files downloaded, and passes plain messages to the listeners (memory ingestion) unless the
channel opted out. A plain message that replies to one of the bot's messages may also stand for
a command (``reply_routes``: a reply to a report asks the report agent); it is remembered too.
Adapters are kept in ``adapters``, a registry by platform. Features are modules with ``setup(app)``.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from bot.adapters.base import Adapters
from bot.commands.registry import CommandContext, Registry, UsageError, parse_text_args
from bot.files import FileRetention
from bot.neutral import Attachment, Incoming, Reply
from engine.config import Config
from engine.db import Database, open_database
from engine.embedder import Embedder
from engine.jobs import Job, JobError, JobRunner
from engine.owners import ProcessOwner

if TYPE_CHECKING:
    from engine.sim.simulations import Simulations

log = logging.getLogger(__name__)

# Feature modules, each with setup(app). Order is the order of /help groups.
FEATURES = [
    "bot.features.core",
    "bot.features.memory",
    "bot.features.llm",
    "bot.features.simulation",
    "bot.features.digest",
]

DRAIN_S = 10.0  # at shutdown, how long commands and adapter hooks under way may take to finish
SETTINGS_RECHECK_S = 1.0  # how stale a cached channel setting may be when another process changed it
MEMORY_SETTING = "memory"  # channel setting: 'off' = plain messages are not remembered

MessageListener = Callable[[Incoming], Awaitable[None]]
SettleHook = Callable[[str | None, str | None], Awaitable[None]]
Hook = Callable[[], Awaitable[None]]
ReadyHook = Callable[[str], Awaitable[None]]
AudienceHook = Callable[[str, dict[str, str]], Awaitable[object]]
# A plain message that replies to one of the bot's messages, as the command it stands for (a reply
# to a report is a question to it), or None when it is not one.
ReplyRoute = Callable[[Incoming], Awaitable[Incoming | None]]


class App:
    def __init__(self, config: Config, db: Database):
        self.config = config
        self.db = db
        # This process as the owner of its jobs and runs (other processes may share the database).
        self.owner = ProcessOwner(db, config.jobs.lease_s)
        self.jobs = JobRunner(db, config.jobs.max_concurrent, self.owner)
        self.commands = Registry()
        self.listeners: list[MessageListener] = []
        self.settle_hooks: list[SettleHook] = []  # (scope, channel) -> once earlier messages are stored
        self.on_start: list[Hook] = []
        self.on_stop: list[Hook] = []
        self.on_ready: list[ReadyHook] = []  # fn(platform) once an adapter is connected
        self.on_audiences: list[AudienceHook] = []  # fn(scope, {channel: audience}) when who can read changed
        self.reply_routes: list[ReplyRoute] = []  # plain replies to the bot's messages that are commands
        self.interrupted: list[Job] = []
        self.services: dict[str, Any] = {}  # engine services features share (memory, llm, scheduler)
        # One embedder per process (the model loads once, on first use): memory's and the simulations'.
        self.embedder = Embedder.from_config(config.embedder)
        self.sims: Simulations | None = None  # set by bot.features.simulation
        self.adapters = Adapters()
        self.background: set = set()  # tasks that follow jobs; kept so they are not collected
        # Commands and adapter hooks under way: shutdown lets them finish (bounded) before the
        # adapters stop and before the database closes; none start once closing.
        self.in_flight: set[asyncio.Task] = set()
        self.closing = False
        self._settings: dict[tuple[str, str, str], str | None] = {}  # (scope, channel, key) -> value
        self._settings_version: int | None = None  # the database's change token when the cache was last checked
        self._settings_checked = float("-inf")
        self.jobs.subscribe(self._follow_new_jobs)
        # downloaded attachments and files written for upload: deleted after use and by age
        self.files = FileRetention(config.data_dir, config.bot.file_retention_hours, db)
        self.jobs.subscribe(self.files.on_job_event)
        self.on_start.append(self.files.start)
        self.on_stop.append(self.files.stop)

    @classmethod
    async def create(cls, config: Config, features: list[str] | None = None) -> "App":
        db = await open_database(config.db_url)
        app = cls(config, db)
        for name in FEATURES if features is None else features:
            importlib.import_module(name).setup(app)
        return app

    async def start(self) -> None:
        await self.owner.start()
        self.interrupted = await self.jobs.recover()
        for hook in self.on_start:
            await hook()

    async def _follow_new_jobs(self, event) -> None:
        # Every job started for a chat channel gets a progress message there, on every platform;
        # a job taken over from a bot process that stopped is announced there.
        job = event.job
        if event.kind != "state" or not job.channel:
            return
        reply = self.reply_to(job.scope, job.channel)
        if reply is None:
            return
        if job.state == "queued":
            from bot.progress import start_following
            start_following(self, job, reply)
        elif event.data.get("taken_over"):
            await reply.send(f"⚠ {job.title} (`{job.id}`) was interrupted: the bot process that ran it stopped. "
                             f"/resume {job.id} continues it from its last checkpoint.")

    async def platform_ready(self, platform: str) -> None:
        """Adapters call this once connected: interrupted jobs are announced, missed posts made."""
        if self.closing:
            return
        with self._tracked():
            await self.announce_interrupted(platform)
            for hook in self.on_ready:
                try:
                    await hook(platform)
                except Exception:
                    log.exception("ready hook failed for %s", platform)

    async def audiences_seen(self, scope: str, audiences: dict[str, str]) -> None:
        """Adapters report who can read their channels (channel -> audience, see Incoming.audience)
        when they connect and whenever permissions change."""
        if self.closing:
            return
        with self._tracked():
            for hook in self.on_audiences:
                try:
                    await hook(scope, audiences)
                except Exception:
                    log.exception("audience hook failed for %s", scope)

    async def announce_interrupted(self, platform: str) -> None:
        """Tell each channel whose job a restart interrupted; adapters call this once connected."""
        for job in self.interrupted:
            if job.scope.split(":", 1)[0] == platform and job.channel:
                reply = self.reply_to(job.scope, job.channel)
                if reply is not None:
                    await reply.send(f"⚠ {job.title} (`{job.id}`) was interrupted by a restart. "
                                     f"/resume {job.id} continues it from its last checkpoint.")

    async def drain(self, timeout: float = DRAIN_S) -> None:
        """Wait (at most ``timeout``) for the commands and adapter hooks under way."""
        running = self.in_flight - {asyncio.current_task()}
        if running:
            await asyncio.wait(running, timeout=timeout)

    @contextlib.contextmanager
    def _tracked(self):
        task = asyncio.current_task()
        self.in_flight.add(task)
        try:
            yield
        finally:
            self.in_flight.discard(task)

    async def close(self) -> None:
        self.closing = True
        await self.drain()
        await self.jobs.shutdown()
        if self.background:
            await asyncio.wait(list(self.background), timeout=5)
        for hook in reversed(self.on_stop):
            try:
                await hook()
            except Exception:
                log.exception("shutdown hook failed")
        await self.owner.release()
        await self.db.close()

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        """A Reply that posts into ``channel`` of ``scope`` without a triggering message."""
        return self.adapters.reply_to(scope, channel)

    # -- settings ----------------------------------------------------------------------

    async def get_setting(self, scope: str, channel: str, key: str, default: str | None = None) -> str | None:
        # Cached: every incoming message reads one. Another bot process on the same database
        # may change one (/memory off there), so the cache is dropped when the database has seen
        # another connection's commit, checked at most once every SETTINGS_RECHECK_S.
        now = time.monotonic()
        if now - self._settings_checked >= SETTINGS_RECHECK_S:
            self._settings_checked = now
            version = await self.db.change_token()
            if version != self._settings_version:
                self._settings.clear()
                self._settings_version = version
        wanted = (scope, channel, key)
        if wanted not in self._settings:
            self._settings[wanted] = await self.db.fetchval(
                "SELECT value FROM channel_settings WHERE scope=? AND channel=? AND key=?", wanted)
        value = self._settings[wanted]
        return default if value is None else value

    async def set_setting(self, scope: str, channel: str, key: str, value: str) -> None:
        await self.db.execute(
            "INSERT INTO channel_settings(scope, channel, key, value) VALUES (?,?,?,?)"
            " ON CONFLICT(scope, channel, key) DO UPDATE SET value=excluded.value",
            (scope, channel, key, value))
        self._settings[(scope, channel, key)] = value

    # -- dispatch ----------------------------------------------------------------------

    @staticmethod
    def split_command(text: str) -> tuple[str, str] | None:
        """'/name@botname args' -> ('name', 'args'); None for a plain message. A slash with no
        name after it ('/', '/ recall x') gives ('', rest): a mistyped command, not a message."""
        text = text.strip()
        if not text.startswith("/"):
            return None
        if len(text) < 2 or text[1].isspace():
            return "", text[1:].strip()
        head, _, rest = text[1:].partition(" ")
        return head.split("@", 1)[0].lower(), rest.strip()

    async def dispatch(self, msg: Incoming, reply: Reply) -> asyncio.Task | None:
        """The one way in for every adapter: a command runs if its rule allows it; a plain
        message is remembered unless its channel opted out. A plain message that replies to
        something standing for a command (a report's message) gives that command's task, which
        runs apart: an adapter that must keep the message until it is answered (Telegram's
        inbox row) waits on it."""
        if msg.command is not None:
            name, rest = msg.command, ""
        else:
            parsed = self.split_command(msg.text) if msg.conventions.text_commands else None
            if parsed is None:
                await self._remember(msg)
                return await self._route_reply(msg, reply) if msg.reply_to else None
            name, rest = parsed
        if not name:
            await reply.error("a command goes right after the slash, like /help (which lists them all); "
                              "nothing was remembered")
            return
        command = self.commands.get(name)
        if command is None:
            await reply.error(f"unknown command /{name}. Type /help for the list.")
            return
        label = f"/{command.name}"
        if (refusal := command.permission.refuse_early(msg, label)) is not None:
            await reply.error(refusal)
            return
        conventions = msg.conventions
        try:
            args = dict(msg.options) if msg.options is not None else parse_text_args(
                command, rest, msg.attachments, conventions.paths_attach, conventions.attach_hint)
        except UsageError as err:
            await reply.error(str(err))
            return
        ctx = CommandContext(self, msg, args, reply)
        try:
            refusal = await command.permission.refuse(ctx, label)
        except Exception:
            log.exception("permission check of /%s failed", command.name)
            refusal = f"{label} could not check who may use it; the error was logged."
        if refusal is not None:
            await reply.error(refusal)
            return
        await reply.accept()
        await self.settled(msg.scope, msg.channel)  # the command sees every earlier message of its channel
        task = asyncio.current_task()
        self.in_flight.add(task)
        try:
            if not await self._fetch_attachments(args, reply):
                return
            await command.handler(ctx)
        except (UsageError, JobError) as err:
            await reply.error(str(err))
        except Exception as err:
            log.exception("command /%s failed", command.name)
            await reply.error(f"/{command.name} failed: {type(err).__name__}. The error was logged.")
        finally:  # the command is over: its downloads go, unless a job or a /confirm needs them
            self.in_flight.discard(task)
            await self.files.discard(a.path for a in msg.attachments)

    async def _route_reply(self, msg: Incoming, reply: Reply) -> asyncio.Task | None:
        """A reply that stands for a command runs as one, in a task of its own (it may wait on an
        LLM): the adapter goes on handing over the channel's later messages meanwhile. Returns
        that task (None when the reply stands for nothing)."""
        for route in self.reply_routes:
            try:
                command = await route(msg)
            except Exception:
                log.exception("reply route failed")
                continue
            if command is not None:
                task = asyncio.ensure_future(self.dispatch(command, reply))
                self.background.add(task)
                task.add_done_callback(self.background.discard)
                return task
        return None

    @staticmethod
    async def _fetch_attachments(args: dict[str, Any], reply: Reply) -> bool:
        """Download the attachments the command takes; False when one could not be (the
        adapter has told the user why)."""
        for value in args.values():
            for att in value if isinstance(value, list) else [value]:
                if isinstance(att, Attachment) and att.path is None and att.fetch is not None:
                    att.path = await att.fetch(reply)
                    if att.path is None:
                        return False
        return True

    async def settled(self, scope: str | None = None, channel: str | None = None) -> None:
        """Return once the plain messages handed over before this call (of that channel; all of
        them when None) are stored. Remembering may return before that: listeners queue messages
        and store them in batches."""
        for hook in self.settle_hooks:
            await hook(scope, channel)

    async def _remember(self, msg: Incoming) -> None:
        if await self.get_setting(msg.scope, msg.channel, MEMORY_SETTING, "on") == "off":
            return  # /memory off (or /settings memory off): this channel is not remembered
        for listener in self.listeners:
            try:
                await listener(msg)
            except Exception:
                log.exception("message listener failed")
