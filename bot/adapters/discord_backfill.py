"""Discord backfill: messages sent while the bot was away are read back from channel history.

The gateway does not replay what was said while the bot was disconnected or down. So on every
connect (discord.py's ``on_ready``, also after a session could not be resumed) and every
``on_resumed``, each remembered channel (one holding stored messages, whose memory is not
switched off with /memory off) is read from its history after the last stored message id,
oldest first, at most ``[discord] backfill_max_messages`` messages per channel, and each
message goes through ``App.dispatch`` like a live one (memory skips what it already holds, so a
message both backfilled and received live is stored once). discord.py paces the history
requests by Discord's rate limits. Runs never overlap: a reconnect during a backfill waits for
it, then starts from what it stored. A live message that arrives while its channel is being
backfilled may be stored before the older ones read back.
"""
from __future__ import annotations

import asyncio
import logging

import discord

from bot.app import MEMORY_SETTING, App

log = logging.getLogger(__name__)

# A stored id as a Discord snowflake (64-bit), or 0 where it is none (an imported message's id, say):
# only digit strings that fit are cast, for PostgreSQL refuses to cast anything else where SQLite
# reads 0, and its INTEGER is 32-bit where snowflakes need BIGINT.
SNOWFLAKE = ("CASE WHEN ltrim(m.message_id, '0123456789') = '' AND (length(m.message_id) < 19 OR"
             " (length(m.message_id) = 19 AND m.message_id <= '9223372036854775807'))"
             " THEN CAST(m.message_id AS BIGINT) ELSE 0 END")


async def remembered_channels(app: App) -> list[tuple[str, str, int]]:
    """(scope, channel, last stored message id) of every Discord channel memory holds messages
    of, except those switched off; 0 for a channel none of whose stored ids is a snowflake."""
    rows = await app.db.fetchall(
        f"SELECT m.scope, m.channel, max({SNOWFLAKE}) AS last FROM memory_messages m "
        "WHERE m.scope LIKE 'discord:%' AND m.message_id <> '' AND NOT EXISTS ("
        " SELECT 1 FROM channel_settings s WHERE s.scope=m.scope AND s.channel=m.channel AND s.key=? "
        " AND s.value='off') GROUP BY m.scope, m.channel ORDER BY m.scope, m.channel", (MEMORY_SETTING,))
    return [(r["scope"], r["channel"], r["last"]) for r in rows]


class Backfill:
    def __init__(self, adapter, max_messages: int):
        self.adapter, self.max_messages = adapter, max_messages   # adapter: the DiscordAdapter
        self.app: App = adapter.app
        self.client: discord.Client = adapter.client
        self._lock = asyncio.Lock()
        self.runs = 0   # completed runs

    @property
    def enabled(self) -> bool:
        cfg = self.app.config
        return self.max_messages > 0 and cfg.memory.enabled and cfg.discord.message_content

    async def run(self) -> int:
        """Backfill every remembered channel; returns how many messages were handed to memory."""
        if not self.enabled:
            return 0
        async with self._lock:
            total = 0
            for scope, channel, last in await remembered_channels(self.app):
                total += await self._channel(scope, int(channel), last)
            await self.app.settled()  # the next run starts after what this one stored
            self.runs += 1
            if total:
                log.info("discord: backfilled %d messages missed while away", total)
            return total

    async def _channel(self, scope: str, channel_id: int, last: int) -> int:
        channel = self.client.get_channel(channel_id) or self.client.get_partial_messageable(channel_id)
        count = 0
        try:
            async for message in channel.history(after=discord.Object(id=last), limit=self.max_messages,
                                                 oldest_first=True):
                if message.author.bot or message.webhook_id is not None or not message.content.strip():
                    continue
                found = self.adapter.incoming(message)
                if message.guild is None:  # a channel no longer cached: its server and audience are unknown
                    found.scope, found.audience = scope, str(channel_id)
                await self.app.dispatch(found, self.adapter.reply_to(scope, str(channel_id)))
                count += 1
        except discord.HTTPException as err:  # no access any more, channel deleted: skip it
            log.warning("discord: cannot read the history of channel %s (%s); not backfilled", channel_id, err)
        return count
