"""Discord backfill: messages sent while the bot was away are read back from channel history.

The gateway does not replay what was said while the bot was disconnected or down. So on every
connect (discord.py's ``on_ready``, also after a session could not be resumed) and every
``on_resumed``, each remembered channel (one holding stored messages, whose memory is not
switched off with /memory off) is read from its history after the last stored message id,
oldest first, at most ``[discord] backfill_max_messages`` messages per channel, and each
message goes through ``App.dispatch`` like a live one (memory skips what it already holds, so a
message both backfilled and received live is stored once), marked ``from_history``: it is only
remembered, never run as a command, so a question asked by replying to a report while the bot
was away is not answered late, and one answered before is never answered twice. discord.py paces the history
requests by Discord's rate limits. Runs never overlap: a reconnect during a backfill waits for
it, then starts from what it stored. A live message that arrives while its channel is being
backfilled may be stored before the older ones read back.

Where a run starts is marked before the connection's live messages can be stored: discord.py
announces a connection (``on_ready``) seconds after the servers arrived and hands over live
messages meanwhile, so "after the last stored message" read at ``on_ready`` would start after
a live one and skip every message said while the bot was away in that channel. So the adapter
calls ``mark`` before it connects and on every disconnect, and holds live messages until the
mark is taken (``marked``); a run starts each channel after its mark, or reads the channels
afresh where none was taken. A mark waiting for its run is kept (it is the earlier). A run
waits for a database that cannot be reached (``Database.outlasting``): a reconnect during a
PostgreSQL restart still reads back what the disconnect missed.

A channel with nothing stored is read back too, when the bot can see it and memory is
not switched off there: its first messages, said while the bot was away, would otherwise never be
read (a later live message, once stored, moves that channel's start past them), nor the
messages of a channel a crash left nothing of (all of them still queued, behind a backlog). Such
a channel is read from the first message memory holds of its server (snowflakes are ordered in
time: what came after it was said while the bot was there), oldest first within the same
per-channel limit; of a server memory holds nothing of, no history from before the bot came is read.
A channel that stays empty in memory (only bots' posts) is read again at each connection.
"""
from __future__ import annotations

import asyncio
import logging

import discord

from bot.app import MEMORY_SETTING, App
from engine.memory import records

log = logging.getLogger(__name__)

async def remembered_channels(app: App) -> list[tuple[str, str, int]]:
    """(scope, channel, last stored message id) of every Discord channel memory holds messages
    of, except those switched off; 0 for a channel none of whose stored ids is a snowflake."""
    return await records.last_numeric_ids(app.db, "discord:%", MEMORY_SETTING)


class Backfill:
    def __init__(self, adapter, max_messages: int):
        self.adapter, self.max_messages = adapter, max_messages   # adapter: the DiscordAdapter
        self.app: App = adapter.app
        self.client: discord.Client = adapter.client
        self._lock = asyncio.Lock()
        self.runs = 0   # completed runs
        self._since: list[tuple[str, str, int]] | None = None   # the mark: remembered_channels before a connection
        self._marked = asyncio.Event()
        self._marked.set()

    @property
    def enabled(self) -> bool:
        cfg = self.app.config
        return self.max_messages > 0 and cfg.memory.enabled and cfg.discord.message_content

    async def mark(self) -> None:
        """Before a connection (at start, at each disconnect): where the next run starts."""
        self._marked.clear()   # before any await: live messages handed over after this wait for the mark
        try:
            if self.enabled and self._since is None:
                self._since = await remembered_channels(self.app)
        except Exception:   # the database away: the run reads the channels afresh
            log.warning("discord: could not mark where the backfill starts", exc_info=True)
        finally:
            self._marked.set()

    async def marked(self) -> None:
        """Once the mark of this connection is taken."""
        await self._marked.wait()

    async def run(self) -> int:
        """Backfill every remembered channel; returns how many messages were handed to memory."""
        if not self.enabled:
            return 0
        async with self._lock:
            total = 0
            since, self._since = self._since, None
            db = self.app.db   # a database that cannot be reached (a PostgreSQL restart) is waited for
            known = since if since is not None else await db.outlasting(
                lambda: remembered_channels(self.app), "discord: the backfill")
            for scope, channel, last in known + await db.outlasting(
                    lambda: self._unremembered(known), "discord: the backfill"):
                total += await self._channel(scope, int(channel), last)
            await self.app.settled()  # the next run starts after what this one stored
            self.runs += 1
            if total:
                log.info("discord: backfilled %d messages missed while away", total)
            return total

    async def _unremembered(self, known: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        """(scope, channel, where to start) of each channel of the bot's servers that memory holds
        nothing of and the bot can see, unless memory is off there."""
        first = await records.first_numeric_ids(self.app.db, "discord:%")
        held = {(scope, channel) for scope, channel, _ in known}
        found = []
        for guild in self.client.guilds:
            scope, me = self.adapter.scope_of(guild.id, 0), guild.me
            if scope not in first:   # nothing stored of this server: nothing from before the bot came is read
                continue
            channels: list[discord.TextChannel | discord.Thread] = [*guild.text_channels, *guild.threads]
            for channel in channels:
                if (scope, str(channel.id)) in held:
                    continue
                if me is not None and not channel.permissions_for(me).view_channel:
                    continue   # hidden from the bot: Discord would refuse (without history permission: empty)
                if await self.app.get_setting(scope, str(channel.id), MEMORY_SETTING, "on") == "off":
                    continue
                found.append((scope, str(channel.id), first[scope] - 1))
        return found

    async def _channel(self, scope: str, channel_id: int, last: int) -> int:
        channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
        count = 0
        if not isinstance(channel, discord.abc.Messageable):  # a forum or a category: no messages of its own
            return count
        try:
            async for message in channel.history(after=discord.Object(id=last), limit=self.max_messages,
                                                 oldest_first=True):
                if message.author.bot or message.webhook_id is not None or not message.content.strip():
                    continue
                found = self.adapter.incoming(message)
                found.from_history = True   # remembered only: never a command, nor a question to a report
                if message.guild is None:  # a channel no longer cached: its server and audience are unknown
                    found.scope, found.audience = scope, str(channel_id)
                await self.app.dispatch(found, self.adapter.reply_to(scope, str(channel_id)))
                count += 1
        except discord.HTTPException as err:  # no access any more, channel deleted: skip it
            log.warning("discord: cannot read the history of channel %s (%s); not backfilled", channel_id, err)
        return count
