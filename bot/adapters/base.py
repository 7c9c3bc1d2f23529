"""The one interface every chat platform implements, and the registry the app keeps them in.

An adapter (console, Discord, Telegram) is a connector in opsdroid's sense: ``connect`` logs
in, ``run`` delivers platform events until told to stop, ``stop`` lets go of the platform, and
``reply_to`` gives a ``Reply`` that posts into a channel without a triggering message (job
progress, digests, notices). In between, an adapter only translates: each platform event
becomes an ``Incoming`` (with the platform's own verdict on ``is_admin``) that it hands to
``App.dispatch`` with a ``Reply``. Deciding command or plain message, permissions and the
memory opt-out all happen there, once for every platform.
"""
from __future__ import annotations

import abc
import asyncio
from typing import ClassVar, TypeVar

from bot.neutral import Conventions, Reply
from engine.config import Config


class Adapter(abc.ABC):
    platform: ClassVar[str]             # 'console', 'discord', 'telegram': the prefix of its scopes
    conventions: Conventions = Conventions()  # how its people type commands and attach files

    @classmethod
    def configured(cls, config: Config) -> bool:
        """Whether ``config`` asks for this adapter (chat platforms: their token is set)."""
        return True

    async def connect(self) -> None:
        """Log in and get ready to receive; a bad token or an unreachable server fails here."""

    @abc.abstractmethod
    async def run(self, stop: asyncio.Event) -> None:
        """Deliver events to the app until ``stop`` is set (or the platform gives up: raise why)."""

    async def stop(self) -> None:
        """Let go of the platform; safe to call when ``connect`` failed or ``run`` never ran."""

    @abc.abstractmethod
    def reply_to(self, scope: str, channel: str) -> Reply | None:
        """A Reply posting into ``channel`` of ``scope``; None while it cannot post there."""

    def locale_of(self, scope: str) -> str:
        """The language the platform knows for a whole server or group (Discord: the server's
        preferred locale), for what the bot posts there unasked (digests); '' when none."""
        return ""


async def serve(adapter: Adapter, stop: asyncio.Event) -> None:
    """connect, run until ``stop`` is set, then always stop."""
    try:
        await adapter.connect()
        await adapter.run(stop)
    finally:
        await adapter.stop()


A = TypeVar("A", bound=Adapter)


class Adapters:
    """The app's adapters, one per platform."""

    def __init__(self) -> None:
        self._by_platform: dict[str, Adapter] = {}

    def add(self, adapter: A) -> A:
        """Register ``adapter``; its channels are reachable through ``reply_to`` from now on."""
        if adapter.platform in self._by_platform:
            raise ValueError(f"a {adapter.platform} adapter is already registered")
        self._by_platform[adapter.platform] = adapter
        return adapter

    def reply_to(self, scope: str, channel: str) -> Reply | None:
        """A Reply into ``channel`` of ``scope`` from the adapter of the scope's platform."""
        adapter = self._by_platform.get(scope.split(":", 1)[0])
        return adapter.reply_to(scope, channel) if adapter is not None else None

    def locale_of(self, scope: str) -> str:
        """The language the scope's platform knows for it ('' when none: Adapter.locale_of)."""
        adapter = self._by_platform.get(scope.split(":", 1)[0])
        return adapter.locale_of(scope) if adapter is not None else ""
