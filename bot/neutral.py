"""The one shape every adapter translates to and from.

An adapter turns a platform event into an ``Incoming`` and gives command code a ``Reply``
that can send, edit, upload and split long text, and answer the asker alone (``privately``:
Discord's ephemeral follow-ups, the asker's private chat on Telegram; a command that answers
privately says so once, ``Command.private``, and every adapter honours it or refuses). Command
logic is written once against these.
What differs between platforms in how people type commands and attach files is stated once
per platform in its ``Conventions``, which every message carries (its wording in English msgids,
translated where a reply uses it: engine.i18n). Every message also carries the language the
platform gives for it (``Incoming.locale``), one of the sources of the chat's language. Attachments are fetched
only when a command that takes them is allowed to run (``Attachment.fetch``). A platform that
may hand the same message over again after a restart (Telegram's inbox) gives it a ``Delivery``,
where the app marks that the message's command ran (bot/once.py).
"""
from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

from engine.i18n import N_, Text

if TYPE_CHECKING:
    from engine.memory.audience import Viewer

log = logging.getLogger(__name__)

# Brings an attachment to local disk; None after telling the user why not (too big, gone).
Fetch = Callable[["Reply"], Awaitable[Path | None]]
# A link to a chat message as the platform writes it -> (scope, channel, platform message id), where
# scope or channel is None when the link does not say; None when the text is no such link.
LinkReader = Callable[[str], "tuple[str | None, str | None, str] | None"]


@dataclass
class Attachment:
    filename: str
    path: Path | None = None  # already on local disk (console, or after download)
    size: int | None = None
    url: str | None = None
    fetch: Fetch | None = None  # how to download it, when it is not on local disk yet
    caption: str = ""           # what the sender said it shows (alt text), remembered with the message


@dataclass(frozen=True)
class Conventions:
    """How people use commands on one platform, for the parts the app words or parses."""

    admins: Text = N_("an administrator")  # who counts as one, as refusals name them
    text_commands: bool = True        # '/name …' text is a command (Discord's commands are interactions)
    paths_attach: bool = False        # leading arguments that name local files attach them (console)
    attach_hint: Text = ""            # how to attach a file here, said when a command misses one
    message_link: LinkReader | None = None   # reads the platform's links to messages (/forget message)


class Delivery(abc.ABC):
    """The platform's stored record of one incoming message that a restart hands over again
    (Telegram's inbox row): the app marks on it that the message's command started, then that
    it ended, so that a command handed over again is not run again (bot/once.py)."""

    STARTED, DONE = "started", "done"

    @abc.abstractmethod
    async def begin(self) -> str | None:
        """Mark the command started, durably, before it does anything; returns the mark found
        (STARTED: cut off before it ended, DONE) when the message was handed over before, else None."""

    @abc.abstractmethod
    async def end(self) -> None:
        """Mark the command done."""


@dataclass
class Incoming:
    platform: str             # 'console', 'discord', 'telegram'
    scope: str                # 'discord:<guild>' or 'telegram:<chat>' or 'console:local'
    channel: str              # channel / chat id within the scope
    author_id: str
    author_name: str
    text: str
    message_id: str = ""
    ts: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    attachments: list[Attachment] = field(default_factory=list)
    is_admin: bool = False    # owner / Manage Server / chat admin / configured role; in a DM, engine.trust's
    is_owner: bool = False    # one of the bot's owners ([bot] owner_ids, the console's user): engine.trust
    conventions: Conventions = Conventions()
    command: str | None = None               # set where the platform marks commands (Discord's slash commands)
                                             # or the adapter parsed one from the text (Telegram)
    options: dict[str, Any] | None = None    # that command's arguments, already typed by the platform
    args_text: str = ""                      # or as typed after the command's name, to parse
    audience: str = ""        # who can read the channel: '' every member of the scope, else a key of its
                              # restricted audience (engine.memory.audience); memory and simulations respect it
    reply_to: str = ""        # the id of the message this one replies to, where the platform has replies
    locale: str = ""          # the language the platform gives for it (Discord: the member's, else the
                              # server's; Telegram: the sender's app language); '' when it gives none
    delivery: Delivery | None = None  # where a message handed over again after a restart is marked (Telegram)
    from_history: bool = False  # read back from the platform's history (Discord's backfill): remembered
                                # only, never run as a command or a question

    @property
    def viewer(self) -> "Viewer":
        """Whom an answer here goes to: the scope and the channel's audience. Memory and simulations
        show it only what that audience may read (engine.memory.audience)."""
        from engine.memory.audience import Viewer  # the memory package is heavy; only its users load it
        return Viewer(self.scope, self.audience)


def human_size(size: int) -> str:
    """1536 -> '1.5 KiB', 25 * 2**20 -> '25.0 MiB'."""
    if size < 2**20:
        return f"{size / 2**10:.1f} KiB"
    return f"{size / 2**20:.1f} MiB"


def split_text(text: str, limit: int) -> list[str]:
    """Split at paragraph, then line, then word boundaries so no piece exceeds ``limit``."""
    text = text.strip()
    pieces: list[str] = []
    while len(text) > limit:
        cut = -1
        for sep in ("\n\n", "\n", " "):
            cut = text.rfind(sep, 0, limit)
            if cut > limit // 3:
                break
        if cut <= 0:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces or [""]


class Sent(abc.ABC):
    """A message the bot has posted and can edit later (progress)."""

    message_id: str = ""   # the platform's id of the message ('' where there is none: the console)

    @abc.abstractmethod
    async def edit(self, text: str) -> None: ...


class Reply(abc.ABC):
    """Where a command's answers go."""

    max_len: int = 2000
    # The platform keeps its own copy of an uploaded file, so the bot's copy may go once it is sent
    # (the console shows the bot's own file instead, kept until [bot] file_retention_hours).
    copies_uploads: bool = True

    @abc.abstractmethod
    async def _send_one(self, text: str) -> Sent: ...

    @abc.abstractmethod
    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent: ...

    async def send(self, text: str) -> Sent:
        """Send text, split into several messages when it is longer than the platform allows."""
        *first, last = split_text(text, self.max_len)   # never empty
        for piece in first:
            await self._send_one(piece)
        return await self._send_one(last)

    async def error(self, text: str) -> None:
        """A refusal or failure, already in the chat's language; platforms that can show it
        privately do (Discord ephemeral)."""
        await self.send(f"⚠ {text}")

    async def accept(self, private: bool = False) -> None:
        """The command passed its permission check and runs now: platforms that must answer
        within seconds acknowledge it here (Discord defers the interaction; ``private``: so that
        only the asker sees it)."""

    def privately(self) -> "Reply | None":
        """Where answers meant for the asker alone go (what memory holds about them, their export,
        a deletion's confirmation): a Reply nobody else reads, or None where the platform has none
        here. None is the default, so no platform ever posts such an answer for all to see."""
        return None

    async def progress_message(self, text: str) -> Sent:
        """A message meant to be edited as long work advances."""
        return await self._send_one(text[: self.max_len])

    @contextlib.asynccontextmanager
    async def typing(self) -> AsyncIterator[None]:
        """A sign of life while the block runs (a long LLM wait): the platform's typing indicator,
        a "thinking…" line at the console. It runs beside the block and never fails it."""
        stop = asyncio.Event()
        shown = asyncio.create_task(self._show_typing(stop))
        try:
            yield
        finally:
            stop.set()
            try:
                await shown
            except Exception as err:  # a sign of life that fails must not fail the answer
                log.info("typing indicator failed: %s", err)

    async def _show_typing(self, stop: asyncio.Event) -> None:
        """Show the platform's sign of life at once and until ``stop`` is set (default: none)."""
