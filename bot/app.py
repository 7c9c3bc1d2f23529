"""The running bot: configuration, storage, jobs and the features that register commands.

Every adapter hands each incoming message to ``dispatch``: it decides command or plain
message, enforces the command's permission rule (bot.permissions) before arguments are parsed
or files downloaded, hands a command that answers privately the adapter's private reply
(``Reply.privately``), and passes plain messages to the listeners (memory ingestion) unless the
channel opted out (a member's own opt-out is memory's to apply, on every path into storage). A
plain message that replies to one of the bot's messages may also stand for a command
(``reply_routes``: a reply to a report asks the report agent); it is remembered too. A command
runs at most once per platform delivery, across restarts (bot/once.py).
Everything a command writes is in the chat's language (``language_of``: ``/settings language``,
else the platform's locale for the message, else ``[bot] language``), set around the command as
engine.i18n's current language; a job started by it keeps that language (engine.jobs).
Adapters are kept in ``adapters``, a registry by platform. Features are modules with ``setup(app)``.
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from bot.adapters.base import Adapters
from bot.commands.registry import (
    CommandContext,
    Registry,
    UsageError,
    check_options,
    parse_command,
    parse_text_args,
)
from bot.confirm import Confirmations
from bot.files import FileRetention
from bot.neutral import Attachment, Incoming, Reply
from bot.once import at_most_once
from bot.public import failure, public
from engine import settings
from engine.config import Config
from engine.i18n import _, normalize, using
from engine.jobs import Job, JobError
from engine.llm.usage import spending_as
from engine.rates import CostlyRate
from engine.services import Services, open_services
from engine.trust import user_key

if TYPE_CHECKING:
    from bot.progress import ResultPoster
    from bot.scheduler import Scheduler
    from engine.memory.audience import Viewer

log = logging.getLogger(__name__)

# Feature modules, each with setup(app). Order is the order of /help groups.
FEATURES = [
    "bot.features.core",
    "bot.features.memory",
    "bot.features.members",
    "bot.features.simulation",
    "bot.features.digest",
]

DRAIN_S = 10.0  # at shutdown, how long commands and adapter hooks under way may take to finish
SETTINGS_RECHECK_S = 1.0  # how stale a cached channel setting may be when another process changed it
MEMORY_SETTING = "memory"  # channel setting: 'off' = plain messages are not remembered
# A command that arrives while the database cannot be reached (a PostgreSQL restart) waits this long
# for it, acknowledged meanwhile; well inside the 15 minutes a Discord interaction can be answered in.
COMMAND_DB_WAIT_S = 300.0
LANGUAGE_SETTING = "language"  # channel setting: the language the bot writes in there ('auto': the platform's)

MessageListener = Callable[[Incoming], Awaitable[None]]
SettleHook = Callable[[str | None, str | None], Awaitable[None]]
Hook = Callable[[], Awaitable[None]]
ReadyHook = Callable[[str], Awaitable[None]]
AudienceHook = Callable[[str, dict[str, str]], Awaitable[object]]
# A plain message that replies to one of the bot's messages, as the command it stands for (a reply
# to a report is a question to it), or None when it is not one.
ReplyRoute = Callable[[Incoming], Awaitable[Incoming | None]]


@dataclass(frozen=True)
class Forgotten:
    """What /forget took from memory, for the features that keep what was said elsewhere
    (``App.on_forget``): everything of the scope, narrowed to one channel, one person's, or
    (``said``) one message's text. ``viewer``: the channel that asked, which reads the answer
    (a note counts only what it may see)."""
    viewer: Viewer
    channel: str | None = None         # None: every channel of the scope
    author_id: str | None = None       # None: everyone's
    said: str | None = None            # one message forgotten: its text (None: all that matched)

    @property
    def scope(self) -> str:
        return self.viewer.scope


# What /forget reaches beyond memory, in another feature's keeping: fn(what was forgotten) -> a
# sentence for the answer (what it removed or keeps), or None.
ForgetHook = Callable[[Forgotten], Awaitable[str | None]]


class App:
    def __init__(self, config: Config, services: Services):
        self.config = config
        # The engine's services (engine.services builds them, and starts and closes them in order);
        # features reach them through the typed attributes below.
        self.services = services
        self.db = services.db
        self.owner = services.owner      # this process as the owner of its jobs and runs
        self.trust = services.trust      # whom the operator trusts to spend: permissions, budgets, job caps
        self.jobs = services.jobs
        self.embedder = services.embedder    # one per process (the model loads once): memory's and the simulations'
        self.llm = services.llm          # None when no LLM endpoint is configured
        self.memory = services.memory
        assert services.sims is not None, "the chat app runs simulations: build its services with them"
        self.sims = services.sims
        # Whether this app serves the chat's memory (set by bot.features.memory): memory is then
        # started with the app, its model warmed, and what it holds shown in digests and /settings.
        self.remembers = False
        self.rates = CostlyRate(services.db, config.bot.costly_per_hour)
        self.confirmations = Confirmations()  # costly actions waiting for /confirm (bot.confirm)
        self.scheduler: Scheduler | None = None  # set by bot.features.digest
        self.commands = Registry()
        self.listeners: list[MessageListener] = []
        self.settle_hooks: list[SettleHook] = []  # (scope, channel) -> once earlier messages are stored
        self.finish_hooks: list[Hook] = []  # work behind stored messages (belief extraction), done now
        self.on_start: list[Hook] = []
        self.on_stop: list[Hook] = []
        self.on_ready: list[ReadyHook] = []  # fn(platform) once an adapter is connected
        self.on_audiences: list[AudienceHook] = []  # fn(scope, {channel: audience}) when who can read changed
        self.reply_routes: list[ReplyRoute] = []  # plain replies to the bot's messages that are commands
        # job kind -> posts a done job's result in its channel, after its final note (bot.progress)
        self.result_posters: dict[str, ResultPoster] = {}
        self.on_forget: list[ForgetHook] = []     # other features' stored text that /forget removes
        self.interrupted: list[Job] = []
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
        self.files = FileRetention(config.data_dir, config.bot.file_retention_hours, services.db)
        self.jobs.subscribe(self.files.on_job_event)
        self.on_start.append(self.files.start)
        self.on_stop.append(self.files.stop)

    @classmethod
    async def create(cls, config: Config, features: list[str] | None = None) -> "App":
        app = cls(config, await open_services(config))
        for name in FEATURES if features is None else features:
            importlib.import_module(name).setup(app)
        return app

    async def start(self) -> None:
        self.interrupted = await self.services.start(memory=self.remembers, warm=self.remembers)
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
            with using(job.language):
                await reply.send(_("⚠ {title} (`{job}`) was interrupted: the bot process that ran it stopped. "
                                   "/resume {job} continues it from its last checkpoint.", title=job.title, job=job.id))

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

    async def sees_job(self, viewer: "Viewer", job: Job) -> bool:
        """Whether ``viewer`` may see ``job`` (list it, cancel or resume it, read of it in a digest):
        a job belongs to its scope and to the audience its channel was last recorded with (the
        memory service keeps that map; a job of no channel, or without memory, is public)."""
        if job.scope != viewer.scope:
            return False
        if not self.remembers or not job.channel:
            return True
        return viewer.sees(await self.memory.audience_of(job.scope, job.channel))

    async def announce_interrupted(self, platform: str) -> None:
        """Tell each channel whose job a restart interrupted; adapters call this once connected."""
        for job in self.interrupted:
            if job.scope.split(":", 1)[0] == platform and job.channel:
                reply = self.reply_to(job.scope, job.channel)
                if reply is not None:
                    with using(job.language):
                        await reply.send(_("⚠ {title} (`{job}`) was interrupted by a restart. /resume {job} "
                                           "continues it from its last checkpoint.", title=job.title, job=job.id))

    async def drain(self, timeout: float = DRAIN_S) -> None:
        """Wait (at most ``timeout``) for the commands and adapter hooks under way."""
        running = self.in_flight - {asyncio.current_task()}
        if running:
            await asyncio.wait(running, timeout=timeout)

    @contextlib.contextmanager
    def _tracked(self):
        task = asyncio.current_task()
        assert task is not None  # a coroutine of the running loop
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
        await self.services.close()

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
            self._settings[wanted] = await settings.read(self.db, scope, channel, key)
        value = self._settings[wanted]
        return default if value is None else value

    async def set_setting(self, scope: str, channel: str, key: str, value: str) -> None:
        await settings.write(self.db, scope, channel, key, value)
        self._settings[(scope, channel, key)] = value

    async def language_of(self, scope: str, channel: str, locale: str = "") -> str:
        """The language the bot writes in to ``channel``: the one chosen there (/settings language),
        else the platform's for the message (``locale``) or for the server, else ``[bot] language``.
        A language no catalog serves is passed over for the next source (engine.i18n.normalize)."""
        chosen = await self.get_setting(scope, channel, LANGUAGE_SETTING)
        return (normalize(chosen) or normalize(locale) or normalize(self.adapters.locale_of(scope))
                or self.config.bot.language)

    # -- dispatch ----------------------------------------------------------------------

    async def dispatch(self, msg: Incoming, reply: Reply) -> asyncio.Task | None:
        """The one way in for every adapter: a command runs if its rule allows it; a plain
        message is remembered unless its channel opted out. A plain message that replies to
        something standing for a command (a report's message) gives that command's task, which
        runs apart: an adapter that must keep the message until it is answered (Telegram's
        inbox row) waits on it. A command handed over again after a restart does not run twice
        (bot/once.py); a message read back from history is only remembered. A plain message is
        handed to memory before anything else is awaited (its language is looked up only for an
        answer it may get), so a command that arrives after it finds it (``settled``)."""
        if msg.command is not None and not msg.from_history:  # parsed by the platform or the adapter
            name, rest = msg.command, msg.args_text
        else:
            parsed = parse_command(msg.text) if msg.conventions.text_commands and not msg.from_history else None
            if parsed is None:
                await self._remember(msg)
                if not msg.reply_to or msg.from_history:
                    return None
                with using(await self.language_of(msg.scope, msg.channel, msg.locale)):
                    return await self._route_reply(msg, reply)
            name, rest = parsed.name, parsed.rest
        language = await self._command_language(msg, reply)
        if language is None:
            return None
        with using(language):
            async with at_most_once(msg, reply, f"/{name}") as first:
                if first:
                    await self._run_command(msg, reply, name, rest)
        return None

    async def _command_language(self, msg: Incoming, reply: Reply) -> str | None:
        """The language a command is answered in: the first read of the database a command makes.
        While the database cannot be reached (a PostgreSQL restart), the command is accepted at once
        (Discord wants that within 3 s) and waits for it up to ``COMMAND_DB_WAIT_S`` rather than
        being dropped; None, with one line to the asker, when it never came back."""
        def read() -> Awaitable[str]:
            return self.language_of(msg.scope, msg.channel, msg.locale)

        try:
            return await read()
        except Exception as err:
            if not self.db.unreachable(err):
                raise
        await reply.accept()
        try:
            return await self.db.outlasting(read, "a command", within=COMMAND_DB_WAIT_S)
        except Exception as err:
            if not self.db.unreachable(err):
                raise
        with using(normalize(msg.locale) or self.config.bot.language):
            await reply.error(_("the bot's database cannot be reached just now, so your command did not run; "
                                "try again in a few minutes"))
        return None

    async def _run_command(self, msg: Incoming, reply: Reply, name: str, rest: str) -> None:
        """Check, parse and run one command (``rest``: as typed after it, or the arguments the
        platform typed, ``msg.options``); its errors become one line in the chat."""
        if not name:
            await reply.error(_("a command goes right after the slash, like /help (which lists them all); "
                                "nothing was remembered"))
            return
        command = self.commands.get(name)
        if command is None:
            await reply.error(_("unknown command /{name}. Type /help for the list.", name=name))
            return
        label = f"/{command.name}"
        if (refusal := command.permission.refuse_early(msg, label)) is not None:
            await reply.error(refusal)
            return
        conventions = msg.conventions
        try:
            args = check_options(command, msg.options) if msg.options is not None else parse_text_args(
                command, rest, msg.attachments, conventions.paths_attach, conventions.attach_hint)
        except UsageError as err:
            await reply.error(str(err))
            return
        ctx = CommandContext(self, msg, args, reply)
        try:
            refusal = await command.permission.refuse(ctx, label)
        except Exception:
            log.exception("permission check of /%s failed", command.name)
            refusal = _("{command} could not check who may use it; the error was logged.", command=label)
        if refusal is not None:
            await reply.error(refusal)
            return
        private = command.answers_privately(ctx)
        await reply.accept(private)
        if private:  # its answers, errors included, go to the asker alone, or nowhere
            alone = reply.privately()
            if alone is None:
                await reply.error(_("{command} answers only the person who asks, and this chat cannot show "
                                    "them anything privately", command=label))
                return
            ctx.reply = reply = alone
        await self.settled(msg.scope, msg.channel)  # the command sees every earlier message of its channel
        task = asyncio.current_task()
        assert task is not None  # a coroutine of the running loop
        self.in_flight.add(task)
        try:
            if not await self._fetch_attachments(args, reply):
                return
            with spending_as(user_key(msg.platform, msg.author_id)):  # what it spends is the asker's
                await command.handler(ctx)
        except UsageError as err:
            await reply.error(str(err))
        except JobError as err:   # meant for people, but may name the LLM endpoint or a server path
            log.info("/%s: %s", command.name, err)
            await reply.error(public(str(err)))
        except Exception as err:
            if not self.db.unreachable(err):
                log.exception("command /%s failed", command.name)
                await reply.error(failure(label))
            else:   # a PostgreSQL restart while it ran: not a bug, and what it did may be half done
                log.warning("command /%s cut short: the database cannot be reached (%s)", command.name,
                            type(err).__name__)
                await reply.error(_("{command} was cut short: the bot's database went away while it ran. Try "
                                    "it again in a minute.", command=label))
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
                task = asyncio.ensure_future(self._answer(command, reply))
                self.background.add(task)
                task.add_done_callback(self.background.discard)
                return task
        return None

    async def _answer(self, msg: Incoming, reply: Reply) -> None:
        """A reply's command: asked again when a restart cut it off before it ended (not twice once done)."""
        async with at_most_once(msg, reply, f"/{msg.command}", again=True) as first:
            if first:
                await self._run_command(msg, reply, msg.command or "", msg.args_text)

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

    async def finished(self) -> None:
        """Return once every message handed over is stored and the work it set off in the
        background (belief extraction, topic names) is done: what `run --wait` waits for."""
        await self.settled()
        for hook in self.finish_hooks:
            await hook()

    async def _remember(self, msg: Incoming) -> None:
        # a message is never dropped because the database is away (PostgreSQL restarting): it waits
        setting = await self.db.outlasting(lambda: self.get_setting(msg.scope, msg.channel, MEMORY_SETTING, "on"),
                                           "a message")
        if setting == "off":
            return  # /memory off (or /settings memory off): this channel is not remembered
        for listener in self.listeners:
            try:
                await listener(msg)
            except Exception:
                log.exception("message listener failed")
