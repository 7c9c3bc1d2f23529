"""Telegram through python-telegram-bot v22: polling, every registered command, progress edits.

Polling is bot.adapters.telegram_inbox: each update is stored before Telegram is told it
arrived, so a crash loses nothing. Plain messages are handed to memory in order; each command
runs in its own task, so a long command in one chat never holds up another. Text goes out as
HTML with everything escaped; `code` spans become <code>. Outgoing calls pass PTB's AIORateLimiter (per-chat and
overall limits; it retries only on 429 flood-waits, when nothing was posted, so nothing is
posted twice). Attachments: the document sent with the command as caption, or the document
the command replies to, downloaded only once the command is allowed to run. Bots may download
at most 20 MB from the cloud Bot API. Chat administrators and owners are the bot's
administrators in a group; in a private chat the person is. The Bot API serves one getUpdates
consumer per bot, so of several bot processes on one database one polls (an engine.claims claim)
and the others stand by, saying so, and take over when it ends; all of them post. A message that
replies to another carries its id (``Incoming.reply_to``) and what the bot sends gives back its
message id (``Sent.message_id``), so a reply to the bot's report can be a question to it (in
privacy mode groups still show the bot replies to its own messages).
"""
from __future__ import annotations

import asyncio
import html
import logging
import re
from pathlib import Path

from telegram import BotCommand, Message, Update
from telegram.constants import ChatAction, ChatMemberStatus, ChatType, ParseMode
from telegram.error import BadRequest, TelegramError
from telegram.ext import AIORateLimiter, Application

from bot.adapters.base import Adapter
from bot.adapters.telegram_inbox import TelegramInbox
from bot.app import App
from bot.neutral import Attachment, Conventions, Incoming, Reply, Sent, human_size
from engine import claims
from engine.config import Config, secret

log = logging.getLogger(__name__)

CAPTION_LIMIT = 1024
TYPING_EVERY_S = 4.0  # Telegram shows a chat action for about 5 s
_CODE = re.compile(r"`([^`\n]+)`")


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


class TelegramReply(Reply):
    max_len = 3800  # 4096 after HTML escaping leaves room

    def __init__(self, bot, chat_id: int, thread_id: int | None, max_upload: int):
        self.bot, self.chat_id, self.thread_id, self.max_upload = bot, chat_id, thread_id, max_upload

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
            return await self.send(f"{path.name} is {human_size(size)}, more than the "
                                   f"{human_size(self.max_upload)} a bot may upload here. It is kept at {path}.")
        short = caption if len(caption) <= CAPTION_LIMIT - 100 else caption[:CAPTION_LIMIT - 101] + "…"
        # an animated GIF goes as an animation: as a photo Telegram would show its first frame only
        kind = ("animation" if path.suffix.lower() == ".gif" else "photo") if image else "document"
        send = {"photo": self.bot.send_photo, "animation": self.bot.send_animation,
                "document": self.bot.send_document}[kind]
        with path.open("rb") as fh:
            kwargs = {kind: fh}
            if not image:
                kwargs["filename"] = path.name
            message = await send(self.chat_id, caption=to_html(short), parse_mode=ParseMode.HTML,
                                 message_thread_id=self.thread_id, **kwargs)
        if short != caption:
            await self.send(caption)
        return TelegramSent(self.bot, message, short)


def _channel(chat_id: int, thread_id: int | None) -> str:
    return f"{chat_id}:{thread_id}" if thread_id else str(chat_id)


def _parse_channel(channel: str) -> tuple[int, int | None]:
    chat, _, thread = channel.partition(":")
    return int(chat), int(thread) if thread else None


class TelegramAdapter(Adapter):
    platform = "telegram"
    conventions = Conventions(admins="a chat administrator", attach_hint=(
        "send the file with the command as its caption, or reply to the file with the command"))

    def __init__(self, app: App):
        self.app = app
        cfg = app.config.telegram
        self.cfg = cfg
        self.max_download = int(cfg.max_download_mb * 2**20)
        self.max_upload = int(cfg.max_upload_mb * 2**20)
        builder = (Application.builder().token(secret(cfg.token_env))
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
        return TelegramReply(self.application.bot, chat_id, thread_id, self.max_upload)

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        return self.reply_for(*_parse_channel(channel)) if self._connected else None

    async def connect(self) -> None:
        application = self.application
        await application.initialize()  # getMe: a bad token fails here
        self.username = application.bot.username or ""
        commands = [BotCommand("start", "What this bot does")] + [
            BotCommand(c.name, c.description[:256]) for c in self.app.commands.commands.values()]
        await application.bot.set_my_commands(commands[:100])
        self._connected = True

    async def run(self, stop: asyncio.Event) -> None:
        inbox = TelegramInbox(self.app.db, self.application.bot, self.on_message,
                              self.is_command, self.app.settled, int(self.cfg.poll_timeout_s),
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

    def is_command(self, update: Update) -> bool:
        message = update.effective_message
        return message is not None and self.app.split_command(message.text or message.caption or "") is not None

    async def _is_admin(self, message: Message) -> bool:
        if message.chat.type == ChatType.PRIVATE:
            return True
        if message.from_user is None:
            return False
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
                await reply.error(f"{name} is {human_size(doc.file_size)}; Telegram lets bots download files up "
                                  f"to {human_size(self.max_download)}. Send a smaller file (or split it, or "
                                  "compress it).")
                return None
            folder = self.app.config.data_dir / "downloads" / "telegram" / str(message.chat.id)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{source.message_id}_{name}"
            try:
                file = await doc.get_file()
                await file.download_to_drive(path)
            except TelegramError as err:
                await reply.error(f"could not download {name}: {err.message}")
                return None
            return path

        return Attachment(name, size=doc.file_size, fetch=fetch)

    async def on_message(self, update: Update) -> asyncio.Task | None:
        """Hand one update to the app; for a reply that asks a question, the task answering it
        (the inbox keeps the update until that task ends)."""
        message = update.effective_message
        if message is None or message.chat is None or (message.from_user and message.from_user.is_bot):
            return None
        text = message.text or message.caption or ""
        thread = message.message_thread_id if message.is_topic_message else None
        reply = self.reply_for(message.chat.id, thread)
        parsed = self.app.split_command(text)
        if parsed is not None:
            head = (text.strip()[1:].split(maxsplit=1) or [""])[0]  # "" for a lone "/"
            addressed = "@" in head
            if addressed and head.split("@", 1)[1].lower() != self.username.lower():
                return None  # addressed to another bot in this group
            if (not addressed and message.chat.type != ChatType.PRIVATE and parsed[0] != "start"
                    and self.app.commands.get(parsed[0]) is None):
                return None  # another bot's command in a shared group: not ours to answer
            if parsed[0] == "start":
                text = "/help"
                await reply.send("Hello! I remember this chat's conversations in topic worlds and can "
                                 "simulate how events unfold. Here is what I can do:")
        user = message.from_user
        incoming = Incoming(
            platform="telegram", scope=f"telegram:{message.chat.id}", channel=_channel(message.chat.id, thread),
            author_id=str(user.id) if user else "", author_name=user.full_name if user else "",
            text=text, message_id=str(message.message_id), ts=message.date, conventions=self.conventions,
            reply_to=str(message.reply_to_message.message_id) if message.reply_to_message else "")
        if parsed is not None and self.app.commands.get(parsed[0]) is not None:
            incoming.is_admin = await self._is_admin(message)
            source = message if message.document else message.reply_to_message
            found = self._attachment(message, source) if source is not None else None
            incoming.attachments = [found] if found is not None else []
        elif message.document is not None:  # a file shared in the chat: memory keeps its name with the caption
            incoming.attachments = [self._attachment(message, message)]
        return await self.app.dispatch(incoming, reply)
