"""Who can read a Discord channel, as the memory audience of its messages (Incoming.audience).

A channel is public ('') when @everyone may view it (the guild's @everyone permissions with the
channel's @everyone overwrite) and no role or member overwrite denies View Channel: every member
reads it. Otherwise only some members do, and its audience is its own id. A private thread is
its own audience (only the members added to it read it); a public thread reads like its parent.
A channel that cannot be judged (no parent known) gets its own id too: its memory then stays
within it until a later look proves it public, so not knowing never shows it to more people.
Direct messages are their own scope already, so they are public within it.
"""
from __future__ import annotations

import discord

from engine.memory.audience import PUBLIC


def audience_of(channel: discord.abc.Snowflake) -> str:
    if isinstance(channel, (discord.DMChannel, discord.GroupChannel)):
        return PUBLIC
    if isinstance(channel, discord.Thread):
        if channel.type is discord.ChannelType.private_thread or channel.parent is None:
            return str(channel.id)
        return audience_of(channel.parent)
    if not isinstance(channel, discord.abc.GuildChannel):  # a partial channel: nothing to judge by
        return str(channel.id)
    if not channel.permissions_for(channel.guild.default_role).view_channel:
        return str(channel.id)
    if any(overwrite.view_channel is False for overwrite in channel.overwrites.values()):
        return str(channel.id)
    return PUBLIC


def guild_audiences(guild: discord.Guild) -> dict[str, str]:
    """channel id -> audience, for every channel (categories aside) and every known thread."""
    out = {str(c.id): audience_of(c) for c in guild.channels if not isinstance(c, discord.CategoryChannel)}
    out.update({str(t.id): audience_of(t) for t in guild.threads})
    return out
