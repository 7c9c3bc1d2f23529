"""Discord through discord.py 2.x: every registered command as a slash command.

Commands are built from their neutral definitions (typed options, attachment options,
choices), so a feature added later needs nothing here; a command's message action becomes a
message context-menu command (right-click a message, Apps) that runs it as if it replied to that
message. An interaction the permission check refuses is answered at once, ephemerally; an
allowed one is deferred and answered with follow-ups (errors ephemeral; a command that answers
privately is deferred ephemerally and all its follow-ups are), and its attachments are
downloaded only then. Administrators are the server owner, members with Manage Server and holders
of the role whose id is ``[discord] admin_role`` (by id only: a role's name is anyone's to give,
in any server); in a direct message, the bot's owners (engine.trust; ``[bot] dm_admins``).
Job progress goes through ``reply_to``: a normal channel message edited at a throttled rate,
because interaction tokens die after 15 minutes. Commands reach Discord only when synced on
demand (``python -m bot discord sync`` or the owner's ``!sync`` message), never on every start.
Messages said while the bot was away are read back from history on every (re)connect
(bot.adapters.discord_backfill).
discord.py handles Discord's rate-limit buckets itself.
Every message and command carries its channel's audience (bot/adapters/discord_audience.py), and
the audiences of a server's channels are reported again when the bot connects and whenever
channels, roles or overwrites change. A reply (message type reply) carries the id of the
message it answers (``Incoming.reply_to``), and what the bot posts gives back its message id
(``Sent.message_id``), so a reply to the bot's report can be a question to it.
Languages: command and option names stay English (typed, stable); their descriptions, choice names
and message-menu labels are synced with a translation per Discord locale the catalogs serve
(``CatalogTranslator``: pt-BR, th). A command answers in the member's language (the interaction's
locale), else the server's preferred locale (App.language_of decides, /settings language first).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.http import Route
from discord.utils import MISSING

from bot.adapters.base import Adapter
from bot.adapters.discord_audience import audience_of, guild_audiences
from bot.adapters.discord_backfill import Backfill
from bot.app import App
from bot.commands.registry import Command
from bot.neutral import Attachment, Conventions, Incoming, Reply, Sent, human_size
from bot.public import failure, kept_where
from engine.config import Config, DiscordSection, secret
from engine.i18n import DEFAULT, N_, Text, _, describe, normalize, using
from engine.memory.audience import PUBLIC
from engine.trust import dm_scope, user_key
from engine.words import plural

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000
LONG_AS_FILE = 3 * MESSAGE_LIMIT   # longer answers are sent as a file instead of many messages
MAX_FILE_SLOTS = 3                 # a 'multiple' attachment argument becomes up to 3 options
OPTION_TYPES: dict[str, type] = {"str": str, "text": str, "int": int, "float": float,
                                 "attachment": discord.Attachment, "flag": bool}
NO_PINGS = discord.AllowedMentions.none()
INVITE_PERMISSIONS = discord.Permissions(view_channel=True, send_messages=True, send_messages_in_threads=True,
                                         attach_files=True, embed_links=True, read_message_history=True)


_LINK = re.compile(r"https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/channels/(\d+|@me)/(\d+)/(\d+)")


def message_link(text: str) -> tuple[str | None, str | None, str] | None:
    """A Discord message link ("Copy Message Link") -> (scope, channel id, message id)."""
    found = _LINK.search(text.strip())
    if found is None:
        return None
    guild, channel, message = found.groups()
    return (None if guild == "@me" else f"discord:{guild}"), channel, message


def point_at(cfg: DiscordSection) -> None:
    """Use another REST base / gateway (a local fake or proxy) when configured."""
    if cfg.api_base:
        Route.BASE = cfg.api_base.rstrip("/")
    if cfg.gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(cfg.gateway_url)


# -- commands ------------------------------------------------------------------------------

def localized(text: Text, limit: int = 100) -> app_commands.locale_str:
    """A description (a msgid or a callable, engine.i18n.Text) as discord.py takes it: its English
    text, with the definition kept for ``CatalogTranslator``."""
    with using(DEFAULT):
        return app_commands.locale_str(describe(text)[:limit], text=text, limit=limit)


class CatalogTranslator(app_commands.Translator):
    """Descriptions, choice names and message-menu labels in each locale a catalog serves; command and
    option names are never translated (None: Discord shows the English name)."""

    async def translate(self, string: app_commands.locale_str, locale: discord.Locale,
                        context: app_commands.TranslationContext) -> str | None:
        naming = context.location in (app_commands.TranslationContextLocation.command_name,
                                      app_commands.TranslationContextLocation.parameter_name)
        if naming and not isinstance(context.data, app_commands.ContextMenu):
            return None
        language = normalize(locale.value)
        if language is None or language == DEFAULT or "text" not in string.extras:
            return None
        with using(language):
            text = describe(string.extras["text"])[:string.extras["limit"]]
        return text if text != string.message else None


Invoke = Callable[..., Awaitable[None]]   # (command, interaction, args[, reply_to])


def build_app_command(command: Command, invoke: Invoke) -> app_commands.Command:
    """A slash command for a neutral command: one typed option per argument."""
    params: list[inspect.Parameter] = []
    descriptions: dict[str, app_commands.locale_str] = {}
    choices: dict[str, list[app_commands.Choice]] = {}
    renames: dict[str, str] = {}
    slots: dict[str, Any] = {}  # python parameter name -> the Arg it fills
    for i, arg in enumerate(command.args):
        many = arg.type == "attachment" and arg.multiple
        names = [arg.name] + ([f"{arg.name}{n}" for n in range(2, MAX_FILE_SLOTS + 1)] if many else [])
        for j, option in enumerate(names):
            py = f"p{i}_{j}"
            if arg.type == "choice" and 0 < len(arg.choices) <= 25:
                annotation: Any = str   # the value stays English; its name is shown translated
                choices[py] = [app_commands.Choice(name=localized(c), value=c) for c in arg.choices]
            else:
                annotation = OPTION_TYPES.get(arg.type, str)
            required = arg.required and j == 0
            params.append(inspect.Parameter(py, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                            default=inspect.Parameter.empty if required else None))
            descriptions[py] = localized(arg.description or arg.name)
            renames[py] = option.lower()[:32]
            slots[py] = arg

    # Discord wants the required options first (a command whose files are optional takes its text first)
    params.sort(key=lambda p: p.default is not inspect.Parameter.empty)

    async def callback(interaction: discord.Interaction, **values: Any) -> None:
        args: dict[str, Any] = {}
        for py, value in values.items():
            if value is None or (slots[py].type == "flag" and value is False):
                continue
            arg = slots[py]
            if arg.type == "attachment" and arg.multiple:
                args.setdefault(arg.name, []).append(value)
            else:
                args[arg.name] = value
        await invoke(command, interaction, args)

    # what discord.py reads off a callback to build the command's options (its decorators set the same)
    described: Any = callback
    described.__signature__ = inspect.Signature([
        inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=discord.Interaction),
        *params])
    described.__discord_app_commands_param_description__ = descriptions
    described.__discord_app_commands_param_rename__ = renames
    described.__discord_app_commands_param_choices__ = choices
    return app_commands.Command(name=command.name, description=localized(command.description or command.name),
                                callback=callback)


def build_message_menu(command: Command, invoke: Invoke) -> app_commands.ContextMenu:
    """The message context-menu command of a neutral command's message action: the command runs
    with the action's arguments, as if it replied to the picked message."""
    action = command.message_action
    assert action is not None  # built only for a command that has one

    async def callback(interaction: discord.Interaction, message: discord.Message) -> None:
        await invoke(command, interaction, dict(action.args), str(message.id))

    return app_commands.ContextMenu(name=localized(action.label, 32), callback=callback)


# -- replies -------------------------------------------------------------------------------

class DiscordSent(Sent):
    def __init__(self, message: discord.Message | None):
        self.message = message
        self.message_id = str(message.id) if message is not None else ""

    async def edit(self, text: str) -> None:
        if self.message is not None:
            await self.message.edit(content=text[:MESSAGE_LIMIT])


class DiscordReply(Reply):
    max_len = MESSAGE_LIMIT

    def __init__(self, adapter: "DiscordAdapter"):
        self.adapter = adapter

    async def _post(self, content: str, file: discord.File | None = None) -> discord.Message | None:
        raise NotImplementedError

    async def _send_one(self, text: str) -> Sent:
        return DiscordSent(await self._post(text))

    async def send(self, text: str) -> Sent:
        if len(text) > LONG_AS_FILE:
            path = self.adapter.outgoing_dir() / f"answer-{time.time_ns()}.md"
            path.write_text(text, encoding="utf-8")
            try:
                return await self.upload(path, _("The answer is long, so here it is as a file."))
            finally:
                if path.stat().st_size <= self.adapter.max_upload:  # a bigger one is kept for the user
                    await self.adapter.app.files.discard([path])
        return await super().send(text)

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        path = Path(path)
        size, limit = path.stat().st_size, self.adapter.max_upload
        if size > limit:
            return await self.send(_("{file} is {size}, more than the {limit} this server accepts from bots, so it "
                                     "is not attached. It is kept {where}.", file=path.name, size=human_size(size),
                                     limit=human_size(limit), where=kept_where(path, self.adapter.app.config.data_dir)))
        return DiscordSent(await self._post(caption[:MESSAGE_LIMIT], discord.File(path, filename=path.name)))

    def _channel_id(self) -> int:
        raise NotImplementedError

    async def _show_typing(self, stop: asyncio.Event) -> None:
        # discord.py says it again every few seconds while the block runs
        async with self.adapter.client.get_partial_messageable(self._channel_id()).typing():
            await stop.wait()


class ChannelReply(DiscordReply):
    """Posts into a channel without an interaction (job progress, digests, notices)."""

    def __init__(self, adapter: "DiscordAdapter", channel_id: int):
        super().__init__(adapter)
        self.channel = adapter.client.get_partial_messageable(channel_id)

    def _channel_id(self) -> int:
        return self.channel.id

    async def _post(self, content: str, file: discord.File | None = None) -> discord.Message:
        # discord.py retries 5xx answers; with an enforced nonce Discord returns the message it
        # already created instead of posting it twice.
        return await self.channel.send(content=content or None, file=file or MISSING, nonce=secrets.token_hex(12))


class InteractionReply(DiscordReply):
    """Follow-ups of a deferred interaction; errors are visible only to the user, and so is all of
    it once ``privately`` (ephemeral follow-ups)."""

    def __init__(self, adapter: "DiscordAdapter", interaction: discord.Interaction):
        super().__init__(adapter)
        self.interaction = interaction
        self.sent_any = False
        self.private = False
        self._public_placeholder = False   # a public "thinking…" that a private answer must not leave behind

    async def accept(self, private: bool = False) -> None:
        if not self.interaction.response.is_done():
            await self.interaction.response.defer(thinking=True, ephemeral=private)
            self._public_placeholder = not private

    def privately(self) -> Reply:
        self.private = True
        return self

    def _channel_id(self) -> int:
        assert self.interaction.channel_id is not None  # commands come from a channel
        return self.interaction.channel_id

    async def _post(self, content: str, file: discord.File | None = None) -> discord.Message:
        await self.accept(self.private)
        if self.private and self._public_placeholder and not self.sent_any:
            await self.interaction.delete_original_response()
            self._public_placeholder = False
        message = await self.interaction.followup.send(content=content or MISSING, file=file or MISSING, wait=True,
                                                       ephemeral=self.private)
        self.sent_any = True
        return message

    async def error(self, text: str) -> None:
        if not self.interaction.response.is_done():  # refused before it was deferred: answer privately now
            await self.interaction.response.send_message(f"⚠ {text}"[:MESSAGE_LIMIT], ephemeral=True)
            self.sent_any = True
            return
        if not self.sent_any:  # the public "thinking…" placeholder would show the error to everyone
            await self.interaction.delete_original_response()
        await self.interaction.followup.send(f"⚠ {text}"[:MESSAGE_LIMIT], ephemeral=True)
        self.sent_any = True

    async def finish(self) -> None:
        if self.interaction.response.is_done() and not self.sent_any:
            await self.interaction.delete_original_response()


# -- the client ------------------------------------------------------------------------------

def guard_parsers(client: discord.Client) -> None:
    """A gateway event discord.py cannot read (a field missing or of the wrong type) is dropped
    with one log line: discord.py lets its parser's exception end ``Client.connect``, so one
    malformed event would take the bot off Discord until it is restarted. The log names the
    event and the exception's type, not the payload (it may quote what someone wrote)."""
    parsers = client._connection.parsers  # the table the gateway looks every event up in

    def guarded(event: str, parse: Callable[[Any], None]) -> Callable[[Any], None]:
        def parse_or_drop(data: Any) -> None:
            try:
                parse(data)
            except Exception as err:
                log.warning("discord: a %s event could not be read (%s); dropped", event, type(err).__name__)
        return parse_or_drop

    for event, parse in list(parsers.items()):
        parsers[event] = guarded(event, parse)


class GuardedTree(app_commands.CommandTree):
    """discord.py's command tree, except that an interaction it cannot read (a malformed name or
    option) is one log line: discord.py runs each in a task of its own and leaves anything but an
    AppCommandError unretrieved there, which asyncio logs as an error with its traceback."""

    async def _call(self, interaction: discord.Interaction) -> None:
        try:
            await super()._call(interaction)
        except app_commands.AppCommandError:
            raise   # the tree's own errors go to on_tree_error
        except Exception as err:
            log.warning("discord: an interaction could not be read (%s); dropped", type(err).__name__)
            log.info("discord: why the interaction could not be read (it may quote what was typed)", exc_info=err)


def make_client(cfg: DiscordSection, intents: discord.Intents) -> discord.Client:
    """One gateway connection, or the shards ``[discord] shard_ids`` of ``shard_count`` (all of
    them when none are named): each process of a sharded bot sees only its shards' servers.
    What the bot posts pings nobody: it echoes what people said (/recall, digests, answers), and
    an ``@everyone`` or a role or user mention in there must stay text. discord.py sends the
    client's ``allowed_mentions`` with every post, follow-up, interaction answer and edit."""
    if not cfg.shard_count:
        return discord.Client(intents=intents, allowed_mentions=NO_PINGS)
    if cfg.shard_ids:
        return discord.AutoShardedClient(intents=intents, shard_count=cfg.shard_count, shard_ids=list(cfg.shard_ids),
                                         allowed_mentions=NO_PINGS)
    return discord.AutoShardedClient(intents=intents, shard_count=cfg.shard_count, allowed_mentions=NO_PINGS)


class DiscordAdapter(Adapter):
    platform = "discord"

    def __init__(self, app: App):
        self.app = app
        self.cfg = app.config.discord
        role = self.cfg.admin_role
        self.conventions = Conventions(   # <@&id> shows the role's name (and pings nobody: NO_PINGS)
            admins=(lambda: _("an administrator (Manage Server or the {role} role)", role=f"<@&{role}>")) if role else
            N_("an administrator (Manage Server)"),
            text_commands=False,  # commands are slash interactions; chat text never is one
            message_link=message_link)
        self.max_upload = int(self.cfg.max_upload_mb * 2**20)
        self.max_download = int(self.cfg.max_download_mb * 2**20)
        point_at(self.cfg)
        intents = discord.Intents.default()
        intents.message_content = self.cfg.message_content
        self.client = make_client(self.cfg, intents)
        guard_parsers(self.client)
        self.tree = GuardedTree(self.client)
        self.tree.error(self.on_tree_error)
        for command in app.commands.commands.values():
            self.tree.add_command(build_app_command(command, self.invoke))
            if command.message_action is not None:
                self.tree.add_command(build_message_menu(command, self.invoke))
        self.client.event(self.on_ready)
        self.client.event(self.on_resumed)
        self.client.event(self.on_disconnect)
        self.client.event(self.on_message)
        self.client.event(self.on_error)
        for event in (self.on_guild_join, self.on_guild_available, self.on_guild_channel_update,
                      self.on_guild_role_create, self.on_guild_role_update, self.on_guild_role_delete):
            self.client.event(event)
        self.backfill = Backfill(self, self.cfg.backfill_max_messages)
        self._announced = False
        self._ready = False
        self._arrival_order = asyncio.Lock()

    @classmethod
    def configured(cls, config: Config) -> bool:
        return secret(config.discord.token_env) is not None

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        return ChannelReply(self, int(channel)) if self._ready else None

    def locale_of(self, scope: str) -> str:
        """The server's preferred locale (Server Settings, Community), for what is posted unasked."""
        guild = self.client.get_guild(int(scope.split(":", 1)[1])) if scope.split(":", 1)[1].isdigit() else None
        return str(guild.preferred_locale) if guild is not None else ""

    def outgoing_dir(self) -> Path:
        path = self.app.config.data_dir / "outgoing" / "discord"
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- scopes and permissions --------------------------------------------------------

    @staticmethod
    def scope_of(guild_id: int | None, user_id: int) -> str:
        return f"discord:{guild_id}" if guild_id else dm_scope("discord", str(user_id))

    def is_owner(self, user: discord.abc.User) -> bool:
        """One of the bot's owners, who may spend in direct messages ([bot] owner_ids)."""
        return self.app.trust.is_owner(user_key("discord", str(user.id)))

    def is_admin(self, user: discord.abc.User, guild: discord.Guild | None,
                 permissions: discord.Permissions | None = None) -> bool:
        if guild is None:  # a direct message with the bot
            return self.app.trust.dm_admin(user_key("discord", str(user.id)))
        if guild.owner_id == user.id or (permissions is not None and permissions.manage_guild):
            return True
        if isinstance(user, discord.Member):
            if user.guild_permissions.manage_guild:
                return True
            wanted = self.cfg.admin_role
            return bool(wanted) and any(str(r.id) == wanted for r in user.roles)
        return False

    # -- events ------------------------------------------------------------------------------

    async def on_ready(self) -> None:
        self._ready = True
        shards = (f" on shards {', '.join(map(str, sorted(self.client.shards)))} of {self.cfg.shard_count}"
                  if isinstance(self.client, discord.AutoShardedClient) else "")
        log.info("discord: connected as %s to %d servers%s", self.client.user, len(self.client.guilds), shards)
        try:
            for guild in self.client.guilds:  # permissions may have changed while the bot was away
                await self.report_audiences(guild)
            if not self._announced:
                self._announced = True
                await self.app.platform_ready("discord")
        finally:   # whatever failed above (the database away), what was missed is read back
            await self.backfill.run()  # on every connect: what was said while the bot was away

    async def on_resumed(self) -> None:
        await self.backfill.run()  # the gateway does not replay what was missed while disconnected

    async def on_disconnect(self) -> None:
        await self.backfill.mark()  # before the next connection's live messages are stored

    # -- who can read which channel ---------------------------------------------------------

    async def report_audiences(self, guild: discord.Guild) -> None:
        await self.app.audiences_seen(self.scope_of(guild.id, 0), guild_audiences(guild))

    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self.report_audiences(guild)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        await self.report_audiences(guild)

    async def on_guild_channel_update(self, before: discord.abc.GuildChannel, after: discord.abc.GuildChannel) -> None:
        await self.report_audiences(after.guild)  # a category's change reaches its channels and threads

    async def on_guild_role_create(self, role: discord.Role) -> None:
        await self.report_audiences(role.guild)

    async def on_guild_role_update(self, before: discord.Role, after: discord.Role) -> None:
        await self.report_audiences(after.guild)

    async def on_guild_role_delete(self, role: discord.Role) -> None:
        await self.report_audiences(role.guild)

    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or message.webhook_id is not None:
            return
        if message.content.strip().startswith("!sync") and await self.may_sync(message.author):
            # "!sync": this server (in a DM: [discord] sync_guild, else global); "!sync global"
            if message.content.split()[1:2] == ["global"]:
                guild_id = None
            elif message.guild is not None:
                guild_id = message.guild.id
            else:
                guild_id = int(self.cfg.sync_guild) if self.cfg.sync_guild else None
            names = await self.sync(guild_id)
            scope = self.scope_of(message.guild.id if message.guild else None, message.author.id)
            locale = str(message.guild.preferred_locale) if message.guild else ""
            with using(await self.app.language_of(scope, str(message.channel.id), locale)):
                where = _("server {id}", id=guild_id) if guild_id else _("all servers (global)")
                await message.channel.send(plural(len(names), "Synced {n} command to {where}: {names}",
                                                  "Synced {n} commands to {where}: {names}", where=where,
                                                  names=", ".join(names)))
            return
        if not self.cfg.message_content or not message.content.strip():
            return  # without the Message Content intent only commands work
        # discord.py runs every event in a task of its own; the lock hands messages to the app in
        # the order they arrived (waiters acquire it first come, first served).
        async with self._arrival_order:
            await self.backfill.marked()
            await self.app.dispatch(self.incoming(message), ChannelReply(self, message.channel.id))

    def incoming(self, message: discord.Message) -> Incoming:
        """A channel message (live or read back from history) as the app takes it."""
        guild_id = message.guild.id if message.guild else None
        return Incoming(
            platform="discord", scope=self.scope_of(guild_id, message.author.id), channel=str(message.channel.id),
            author_id=str(message.author.id), author_name=message.author.display_name, text=message.content,
            message_id=str(message.id), ts=message.created_at, conventions=self.conventions,
            attachments=[Attachment(a.filename, size=a.size, url=a.url, caption=a.description or "")
                         for a in message.attachments],  # names for memory; chat text never takes files
            audience=audience_of(message.channel) if message.guild else PUBLIC,
            # known from the message itself: a reply to a report may stand for a command
            is_admin=self.is_admin(message.author, message.guild),
            is_owner=self.is_owner(message.author),
            reply_to=str(message.reference.message_id or "")
            if message.reference and message.type == discord.MessageType.reply else "",
            locale=str(message.guild.preferred_locale) if message.guild else "")

    async def may_sync(self, user: discord.abc.User) -> bool:
        """The Discord owners of [bot] owner_ids; without any, the application's owner (or team)."""
        if any(owner.startswith("discord:") for owner in self.app.trust.owners):
            return self.is_owner(user)
        info = await self.client.application_info()
        owners = {m.id for m in info.team.members} if info.team else {info.owner.id}
        return user.id in owners

    async def sync(self, guild_id: int | None) -> list[str]:
        """Publish the slash commands, their descriptions translated: to one guild (instant) or globally."""
        if self.tree.translator is None:
            await self.tree.set_translator(CatalogTranslator())
        if guild_id:
            guild = discord.Object(id=guild_id)
            self.tree.copy_global_to(guild=guild)
            synced = await self.tree.sync(guild=guild)
        else:
            synced = await self.tree.sync()
        return [c.name for c in synced]

    async def on_error(self, event: str, *args: Any, **kwargs: Any) -> None:
        """An event handler that raised (a message discord.py read but whose fields are not what
        they should be): one line, as for a slash command (``on_tree_error``); the traceback at
        INFO, since it may quote what someone wrote. discord.py's default logs it as an error."""
        error = sys.exc_info()[1]
        log.warning("discord: the %s handler failed (%s)", event, type(error).__name__)
        log.info("discord: why handling the event failed (it may quote what someone wrote)", exc_info=error)

    async def on_tree_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        log.warning("discord: a command failed (%s)", type(error).__name__)
        log.info("discord: why the command failed (it may quote what the user typed)", exc_info=error)
        command = interaction.command
        user = getattr(interaction.user, "id", None)   # discord.py leaves it MISSING when no one sent it
        lang: str | None = None   # an interaction too malformed to say whose it is: the default language
        if user is not None:
            scope = self.scope_of(interaction.guild_id, user)
            try:
                lang = await self.app.language_of(scope, str(interaction.channel_id), self.locale_here(interaction))
            except Exception:   # the database away (why the command failed, too): said in the default language
                lang = None
        with using(lang):
            text = "⚠ " + failure(f"/{command.name}" if command is not None else _("the command"))  # details: logged
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True)
        else:
            await interaction.response.send_message(text, ephemeral=True)

    async def invoke(self, command: Command, interaction: discord.Interaction, args: dict[str, Any],
                     reply_to: str = "") -> None:
        """Run a slash command (or a message action: ``reply_to`` is the message it was picked on)."""
        user = interaction.user
        reply = InteractionReply(self, interaction)
        attachments: list[Attachment] = []
        for name, value in list(args.items()):
            files = value if isinstance(value, list) else [value]
            if not files or not isinstance(files[0], discord.Attachment):
                continue
            local = [self.attachment(item, interaction) for item in files]
            attachments += local
            args[name] = local if isinstance(value, list) else local[0]
        text = " ".join([f"/{command.name}"] + [str(v) for v in args.values() if isinstance(v, (str, int, float))])
        msg = Incoming(platform="discord", scope=self.scope_of(interaction.guild_id, user.id),
                       channel=str(interaction.channel_id), author_id=str(user.id), author_name=user.display_name,
                       text=text, message_id=str(interaction.id), ts=interaction.created_at,
                       attachments=attachments,
                       is_admin=self.is_admin(user, interaction.guild, interaction.permissions),
                       is_owner=self.is_owner(user),
                       conventions=self.conventions, command=command.name, options=args,
                       audience=self.audience_here(interaction), reply_to=reply_to,
                       locale=self.locale_here(interaction))
        await self.app.dispatch(msg, reply)
        await reply.finish()

    def attachment(self, item: discord.Attachment, interaction: discord.Interaction) -> Attachment:
        """An option's attachment, downloaded only if the command is allowed to run."""

        async def fetch(reply: Reply) -> Path | None:
            if item.size > self.max_download:
                await reply.error(_("{file} is {size}; the limit is {limit}.", file=item.filename,
                                    size=human_size(item.size), limit=human_size(self.max_download)))
                return None
            folder = self.app.config.data_dir / "downloads" / "discord" / str(interaction.channel_id)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{item.id}_{Path(item.filename).name}"
            try:
                await item.save(path)
            except discord.HTTPException as err:
                await reply.error(_("could not download {file}: {error}", file=item.filename, error=err.status))
                return None
            return path

        return Attachment(item.filename, size=item.size, url=item.url, fetch=fetch)

    @staticmethod
    def locale_here(interaction: discord.Interaction) -> str:
        """The member's language when a catalog serves it, else the server's (App.language_of takes it)."""
        member, server = str(interaction.locale), str(interaction.guild_locale or "")
        return member if normalize(member) else server

    @staticmethod
    def audience_here(interaction: discord.Interaction) -> str:
        """The audience of the channel a command came from (a channel not known: its own id)."""
        guild = interaction.guild
        if guild is None:
            return PUBLIC
        channel = ((guild.get_channel_or_thread(interaction.channel_id) if interaction.channel_id is not None
                    else None) or interaction.channel)
        return audience_of(channel) if channel is not None else str(interaction.channel_id)

    # -- running ------------------------------------------------------------------------------

    async def connect(self) -> None:
        await self.client.login(secret(self.cfg.token_env) or "")  # a bad token fails here with LoginFailure

    async def run(self, stop: asyncio.Event) -> None:
        await self.backfill.mark()
        connection = asyncio.create_task(self.client.connect(reconnect=True))
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([connection, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if connection.done():
            connection.result()  # the gateway gave up: report why

    async def stop(self) -> None:
        self._ready = False
        await self.client.close()


async def sync_commands(app: App, guild_id: int | None) -> list[str]:
    """Log in over REST only (no gateway) and publish the commands; returns their names."""
    adapter = DiscordAdapter(app)
    try:
        await adapter.client.login(secret(adapter.cfg.token_env) or "")
        return await adapter.sync(guild_id)
    finally:
        await adapter.client.close()


def invite_url(application_id: int) -> str:
    return discord.utils.oauth_url(application_id, permissions=INVITE_PERMISSIONS,
                                   scopes=("bot", "applications.commands"))
