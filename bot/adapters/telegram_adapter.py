"""Telegram through python-telegram-bot v22: polling, every registered command, progress edits.

Polling is bot.adapters.telegram_inbox: each update is stored before Telegram is told it
arrived, so a crash loses nothing. Plain messages are handed to memory in order; each command
runs in its own task, so a long command in one chat never holds up another. Text goes out as
HTML with everything escaped; `code` spans become <code>. Outgoing calls pass PTB's AIORateLimiter (per-chat and
overall limits; it retries only on 429 flood-waits, when nothing was posted, so nothing is
posted twice). Attachments: the document sent with the command as caption, or the document
the command replies to, downloaded only once the command is allowed to run. Bots may download
at most 20 MB from the cloud Bot API. Chat administrators and owners are the bot's
administrators in a group; in a private chat the bot's owners are (engine.trust; ``[bot]
dm_admins``). The Bot API serves one getUpdates
consumer per bot, so of several bot processes on one database one polls (an engine.claims claim)
and the others stand by, saying so, and take over when it ends; all of them post. A message that
replies to another carries its id (``Incoming.reply_to``) and what the bot sends gives back its
message id (``Sent.message_id``), so a reply to the bot's report can be a question to it (in
privacy mode groups still show the bot replies to its own messages). An answer for the asker alone
(``Reply.privately``) goes to their private chat with the bot, with a short note in the group
pointing there; a person who never started the bot cannot be written to (Telegram answers 403),
and the group note says how to start it instead.
Languages: a command answers in the sender's app language (``language_code``) when a catalog
serves it (App.language_of: /settings language first); the command menu is set once per language
(``setMyCommands`` with ``language_code`` "pt" and "th", and the English default for the rest).
"""
from __future__ import annotations

import asyncio
import html
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telegram import BotCommand, Message, Update
from telegram.constants import ChatAction, ChatMemberStatus, ChatType, ParseMode
from telegram.error import BadRequest, Forbidden, TelegramError
from telegram.ext import AIORateLimiter, Application

from bot.adapters.base import Adapter
from bot.adapters.telegram_inbox import InboxDelivery, TelegramInbox
from bot.app import App
from bot.commands.registry import CommandText, parse_command
from bot.neutral import Attachment, Conventions, Incoming, Reply, Sent, human_size
from bot.public import kept_where
from engine import claims
from engine.config import Config, secret
from engine.i18n import DEFAULT, LANGUAGES, N_, _, describe, using
from engine.trust import user_key

log = logging.getLogger(__name__)

CAPTION_LIMIT = 1024
TYPING_EVERY_S = 4.0  # Telegram shows a chat action for about 5 s
_CODE = re.compile(r"`([^`\n]+)`")
# t.me/c/<chat id without -100>/<message> (or /<topic>/<message>): a private group's message link;
# t.me/<username>/<message>: a public one's, which does not say which chat.
_LINK = re.compile(r"https?://t\.me/(?:c/(\d+)|[A-Za-z]\w{3,})/(?:(\d+)/)?(\d+)\b")


def message_link(text: str) -> tuple[str | None, str | None, str] | None:
    """A Telegram message link ("Copy Message Link") -> (scope, channel, message id)."""
    found = _LINK.search(text.strip())
    if found is None:
        return None
    internal, topic, message = found.groups()
    if internal is None:
        return None, None, message
    chat = f"-100{internal}"
    return f"telegram:{chat}", _channel(int(chat), int(topic) if topic else None), message


def to_html(text: str) -> str:
    """Escape for Telegram's HTML mode; `spans` become <code>."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text, quote=False))


class TelegramSent(Sent):
    def __init__(self, bot, message: Message, text: str):
        self.bot, self.message, self.text = bot, message, text
        self.message_id = str(message.message_id)

    async def edit(self, text: str) -> None:
        if text == self.text:  # Telegram refuses an edit to identical text
            return
        try:
            await self.message.edit_text(to_html(text[:TelegramReply.max_len]), parse_mode=ParseMode.HTML)
        except BadRequest as err:
            if "not modified" not in str(err):
                raise
        self.text = text


@dataclass(frozen=True)
class Asker:
    """Who sent the message a reply answers, for answers meant for them alone."""
    user_id: int
    name: str
    bot_username: str


class TelegramReply(Reply):
    max_len = 3800  # 4096 after HTML escaping leaves room

    def __init__(self, bot, chat_id: int, thread_id: int | None, max_upload: int, data_dir: Path,
                 asker: Asker | None = None):
        self.bot, self.chat_id, self.thread_id, self.max_upload = bot, chat_id, thread_id, max_upload
        self.data_dir, self.asker = data_dir, asker

    def privately(self) -> Reply | None:
        if self.asker is None:
            return None
        if self.chat_id == self.asker.user_id:   # their private chat with the bot already
            return self
        return PrivateReply(self.bot, self.asker, self.max_upload, self)

    async def _send_one(self, text: str) -> Sent:
        message = await self.bot.send_message(self.chat_id, to_html(text), parse_mode=ParseMode.HTML,
                                              message_thread_id=self.thread_id)
        return TelegramSent(self.bot, message, text)

    async def _show_typing(self, stop: asyncio.Event) -> None:
        # Telegram shows a chat action for 5 s at most: say it again until the answer is ready
        while True:
            await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING, message_thread_id=self.thread_id)
            try:
                await asyncio.wait_for(stop.wait(), TYPING_EVERY_S)
                return
            except asyncio.TimeoutError:
                pass

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        path = Path(path)
        size = path.stat().st_size
        if size > self.max_upload:
            return await self.send(_("{file} is {size}, more than the {limit} a bot may upload here. It is kept "
                                     "{where}.", file=path.name, size=human_size(size),
                                     limit=human_size(self.max_upload), where=kept_where(path, self.data_dir)))
        short = caption if len(caption) <= CAPTION_LIMIT - 100 else caption[:CAPTION_LIMIT - 101] + "…"
        # an animated GIF goes as an animation: as a photo Telegram would show its first frame only
        kind = ("animation" if path.suffix.lower() == ".gif" else "photo") if image else "document"
        send = {"photo": self.bot.send_photo, "animation": self.bot.send_animation,
                "document": self.bot.send_document}[kind]
        with path.open("rb") as fh:
            kwargs: dict[str, Any] = {kind: fh}
            if not image:
                kwargs["filename"] = path.name
            message = await send(self.chat_id, caption=to_html(short), parse_mode=ParseMode.HTML,
                                 message_thread_id=self.thread_id, **kwargs)
        if short != caption:
            await self.send(caption)
        return TelegramSent(self.bot, message, short)


class _Unsent(Sent):
    """What a private answer that could not be delivered returns: nothing to edit."""

    async def edit(self, text: str) -> None:
        pass


class PrivateReply(TelegramReply):
    """The asker's private chat with the bot, answering a command sent in a group: the group gets
    one short note pointing there, or, when the bot may not write to them (they never pressed
    Start: Telegram answers 403), one note saying how to start it; the answer is then dropped."""

    def __init__(self, bot, asker: Asker, max_upload: int, group: TelegramReply):
        super().__init__(bot, asker.user_id, None, max_upload, group.data_dir, asker)
        self.group = group
        self.noted = False
        self.blocked = False

    async def _deliver(self, send):
        if self.blocked:
            return _Unsent()
        try:
            sent = await send()
        except Forbidden:
            self.blocked = True
            await self.group.send(_("⚠ {name}, I can only answer that in our private chat, and Telegram does not "
                                    "let me write to you there until you open a chat with @{bot} and press Start. "
                                    "Then ask again.", name=self.asker.name, bot=self.asker.bot_username))
            return _Unsent()
        if not self.noted:
            self.noted = True
            await self.group.send(_("📬 {name}, I answered you in our private chat.", name=self.asker.name))
        return sent

    async def _send_one(self, text: str) -> Sent:
        return await self._deliver(lambda: super(PrivateReply, self)._send_one(text))

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        return await self._deliver(lambda: super(PrivateReply, self).upload(path, caption, image))

    async def _show_typing(self, stop: asyncio.Event) -> None:
        if not self.blocked:
            await super()._show_typing(stop)


def menu_language(language: str) -> str:
    """A catalog's language as Telegram's ``language_code`` names it (two letters: pt_BR -> pt)."""
    return language.split("_", 1)[0]


def check_fields(message: Message) -> None:
    """ValueError naming the first field the bot reads whose type is wrong. python-telegram-bot
    checks no types, so a chat id that is text or a sender that is a list would fail somewhere
    inside a command, or be stored; Telegram never sends one, but a proxy in between might."""
    user, document, answered = message.from_user, message.document, message.reply_to_message
    maybe_int: tuple[type, ...] = (int, type(None))
    maybe_str: tuple[type, ...] = (str, type(None))
    fields: list[tuple[str, object, type | tuple[type, ...]]] = [
        ("message_id", message.message_id, int), ("chat.id", message.chat.id, int),
              ("chat.type", message.chat.type, str), ("text", message.text, maybe_str),
              ("caption", message.caption, maybe_str), ("message_thread_id", message.message_thread_id, maybe_int)]
    if user is not None:
        fields += [("from.id", user.id, int), ("from.is_bot", user.is_bot, bool),
                   ("from.first_name", user.first_name, str), ("from.last_name", user.last_name, maybe_str)]
    if document is not None:
        fields += [("document.file_id", document.file_id, str), ("document.file_name", document.file_name, maybe_str),
                   ("document.file_size", document.file_size, maybe_int)]
    if answered is not None:
        fields += [("reply_to_message.message_id", answered.message_id, int)]
    for name, value, kind in fields:
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise ValueError(f"{name} is a {type(value).__name__}")


def _channel(chat_id: int, thread_id: int | None) -> str:
    return f"{chat_id}:{thread_id}" if thread_id else str(chat_id)


def _parse_channel(channel: str) -> tuple[int, int | None]:
    chat, _, thread = channel.partition(":")
    return int(chat), int(thread) if thread else None


class TelegramAdapter(Adapter):
    platform = "telegram"
    conventions = Conventions(admins=N_("a chat administrator"), attach_hint=N_(
        "send the file with the command as its caption, or reply to the file with the command"),
        message_link=message_link)

    def __init__(self, app: App):
        self.app = app
        cfg = app.config.telegram
        self.cfg = cfg
        self.max_download = int(cfg.max_download_mb * 2**20)
        self.max_upload = int(cfg.max_upload_mb * 2**20)
        builder = (Application.builder().token(secret(cfg.token_env) or "")  # configured(): it is set
                   .job_queue(None)  # the bot's one scheduler is bot.scheduler
                   .updater(None)    # polling is TelegramInbox's: it stores updates before confirming them
                   .rate_limiter(AIORateLimiter(overall_max_rate=cfg.overall_max_rate, overall_time_period=1,
                                                group_max_rate=cfg.group_max_rate, group_time_period=60,
                                                max_retries=cfg.max_retries))
                   .get_updates_read_timeout(cfg.poll_timeout_s + 10))
        if cfg.base_url:
            builder = builder.base_url(cfg.base_url)
        if cfg.base_file_url:
            builder = builder.base_file_url(cfg.base_file_url)
        self.application = builder.build()
        self.username = ""
        self._connected = False

    @classmethod
    def configured(cls, config: Config) -> bool:
        return secret(config.telegram.token_env) is not None

    def reply_for(self, chat_id: int, thread_id: int | None) -> TelegramReply:
        return TelegramReply(self.application.bot, chat_id, thread_id, self.max_upload, self.app.config.data_dir)

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        return self.reply_for(*_parse_channel(channel)) if self._connected else None

    async def connect(self) -> None:
        application = self.application
        await application.initialize()  # getMe: a bad token fails here
        self.username = application.bot.username or ""
        for language in LANGUAGES:   # the English menu is the default, for every other language too
            with using(language):
                commands = [BotCommand("start", _("What this bot does"))] + [
                    BotCommand(c.name, describe(c.description)[:256]) for c in self.app.commands.commands.values()]
            await application.bot.set_my_commands(
                commands[:100], language_code=None if language == DEFAULT else menu_language(language))
        self._connected = True

    async def run(self, stop: asyncio.Event) -> None:
        inbox = TelegramInbox(self.app.db, self.application.bot, self.on_message,
                              self.command_of, self.app.settled, int(self.cfg.poll_timeout_s),
                              [Update.MESSAGE])
        await self.app.platform_ready(self.platform)
        poller = f"telegram polling of bot {self.application.bot.id}"
        if not await self._claim_polling(poller, stop):
            return
        log.info("telegram: polling as @%s", self.username)
        try:
            await inbox.run(stop)
        finally:
            await claims.release(self.app.db, self.app.owner, poller)

    async def _claim_polling(self, poller: str, stop: asyncio.Event) -> bool:
        """Become the one process that polls this bot (the Bot API serves one getUpdates
        consumer); while another live process does, stand by and say so once. False if the
        bot stops first. This process still posts into chats meanwhile (its jobs' progress)."""
        waiting = False
        while not stop.is_set():
            holder = await claims.claim(self.app.db, self.app.owner, poller)
            if holder is None:
                if waiting:
                    log.warning("telegram: the process that polled @%s is gone; this one polls it now",
                                self.username)
                return True
            if not waiting:
                log.warning("telegram: @%s is already polled by %s, and Telegram lets only one process poll a "
                            "bot; this process stands by and takes over if that one ends", self.username, holder)
                waiting = True
            try:
                await asyncio.wait_for(stop.wait(), self.app.owner.lease_s / 3)
            except asyncio.TimeoutError:
                pass
        return False

    async def stop(self) -> None:
        self._connected = False
        await self.application.shutdown()

    @staticmethod
    def command_of(update: Update) -> CommandText | None:
        """The command the update's text or caption types, read once: the inbox runs it apart and
        hands it back to ``on_message`` with the update. ValueError for a message whose fields the
        bot reads have the wrong type (``check_fields``): the inbox drops it."""
        message = update.effective_message
        if message is None:
            return None
        check_fields(message)
        return parse_command(message.text or message.caption or "")

    async def _is_admin(self, message: Message) -> bool:
        if message.from_user is None:
            return False
        if message.chat.type == ChatType.PRIVATE:
            return self.app.trust.dm_admin(user_key("telegram", str(message.from_user.id)))
        member = await message.chat.get_member(message.from_user.id)
        return member.status in (ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER)

    def _attachment(self, message: Message, source: Message) -> Attachment | None:
        """The document of ``source``, to be downloaded only if a command takes it."""
        doc = source.document
        if doc is None:
            return None
        name = Path(doc.file_name or f"{doc.file_unique_id}.bin").name

        async def fetch(reply: Reply) -> Path | None:
            if doc.file_size and doc.file_size > self.max_download:
                await reply.error(_("{file} is {size}; Telegram lets bots download files up to {limit}. Send a "
                                    "smaller file (or split it, or compress it).", file=name,
                                    size=human_size(doc.file_size), limit=human_size(self.max_download)))
                return None
            folder = self.app.config.data_dir / "downloads" / "telegram" / str(message.chat.id)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{source.message_id}_{name}"
            try:
                file = await doc.get_file()
                await file.download_to_drive(path)
            except TelegramError as err:
                await reply.error(_("could not download {file}: {error}", file=name, error=err.message))
                return None
            return path

        return Attachment(name, size=doc.file_size, fetch=fetch)

    async def on_message(self, update: Update, parsed: CommandText | None,
                         delivery: InboxDelivery | None = None) -> asyncio.Task | None:
        """Hand one update to the app, with the command its text types (``command_of``: None for a
        plain message); for a reply that asks a question, the task answering it (the inbox keeps the
        update until that task ends). ``delivery``: its inbox row, where its command is marked so
        that a restart does not run it twice."""
        message = update.effective_message
        if message is None or message.chat is None or (message.from_user and message.from_user.is_bot):
            return None
        text = message.text or message.caption or ""
        thread = message.message_thread_id if message.is_topic_message else None
        user = message.from_user
        reply = TelegramReply(self.application.bot, message.chat.id, thread, self.max_upload, self.app.config.data_dir,
                              Asker(user.id, user.first_name, self.username) if user else None)
        if parsed is not None:
            if parsed.addressee is not None and parsed.addressee.lower() != self.username.lower():
                return None  # addressed to another bot in this group
            if (parsed.addressee is None and message.chat.type != ChatType.PRIVATE and parsed.name != "start"
                    and self.app.commands.get(parsed.name) is None):
                return None  # another bot's command in a shared group: not ours to answer
        incoming = Incoming(
            platform="telegram", scope=f"telegram:{message.chat.id}", channel=_channel(message.chat.id, thread),
            author_id=str(user.id) if user else "", author_name=user.full_name if user else "",
            text=text, message_id=str(message.message_id), ts=message.date, conventions=self.conventions,
            reply_to=str(message.reply_to_message.message_id) if message.reply_to_message else "",
            delivery=delivery,
            is_owner=user is not None and self.app.trust.is_owner(user_key("telegram", str(user.id))),
            # a private chat's administrator needs no API call (a reply there may stand for a command)
            is_admin=message.chat.type == ChatType.PRIVATE and await self._is_admin(message),
            locale=user.language_code or "" if user else "")
        if parsed is not None and parsed.name == "start":
            parsed = CommandText("help", "")
            if delivery is None or delivery.mark is None:  # not greeted already, before a restart
                with using(await self.app.language_of(incoming.scope, incoming.channel, incoming.locale)):
                    await reply.send(_("Hello! I remember this chat's conversations in topic worlds and can simulate "
                                       "how events unfold. Here is what I can do:"))
        if parsed is not None:  # handed over parsed: the app reads no command from the text again
            incoming.command, incoming.args_text = parsed.name, parsed.rest
        if parsed is not None and self.app.commands.get(parsed.name) is not None:
            incoming.is_admin = await self._is_admin(message)
            source = message if message.document else message.reply_to_message
            found = self._attachment(message, source) if source is not None else None
            incoming.attachments = [found] if found is not None else []
        elif (shared := self._attachment(message, message)) is not None:
            incoming.attachments = [shared]  # a file shared in the chat: memory keeps its name with the caption
        return await self.app.dispatch(incoming, reply)
