"""The one shape every adapter translates to and from.

An adapter turns a platform event into an ``Incoming`` and gives command code a ``Reply``
that can send, edit, upload and split long text. Command logic is written once against these.
What differs between platforms in how people type commands and attach files is stated once
per platform in its ``Conventions``, which every message carries. Attachments are fetched
only when a command that takes them is allowed to run (``Attachment.fetch``).
"""
from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

log = logging.getLogger(__name__)

# Brings an attachment to local disk; None after telling the user why not (too big, gone).
Fetch = Callable[["Reply"], Awaitable[Path | None]]


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

    admins: str = "an administrator"  # who counts as one, as refusals name them
    text_commands: bool = True        # '/name …' text is a command (Discord's commands are interactions)
    paths_attach: bool = False        # leading arguments that name local files attach them (console)
    attach_hint: str = ""             # how to attach a file here, said when a command misses one


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
    is_admin: bool = False    # owner / Manage Server / chat admin / configured role
    conventions: Conventions = Conventions()
    command: str | None = None               # set where the platform marks commands (Discord's slash commands)
    options: dict[str, Any] | None = None    # that command's arguments, already typed by the platform
    audience: str = ""        # who can read the channel: '' every member of the scope, else a key of its
                              # restricted audience (engine.memory.audience); memory answers respect it
    reply_to: str = ""        # the id of the message this one replies to, where the platform has replies


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

    @abc.abstractmethod
    async def _send_one(self, text: str) -> Sent: ...

    @abc.abstractmethod
    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent: ...

    async def send(self, text: str) -> Sent:
        """Send text, split into several messages when it is longer than the platform allows."""
        sent = None
        for piece in split_text(text, self.max_len):
            sent = await self._send_one(piece)
        return sent

    async def error(self, text: str) -> None:
        """A refusal or failure; platforms that can show it privately do (Discord ephemeral)."""
        await self.send(f"⚠ {text}")

    async def accept(self) -> None:
        """The command passed its permission check and runs now: platforms that must answer
        within seconds acknowledge it here (Discord defers the interaction)."""

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
