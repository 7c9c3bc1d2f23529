"""A seed brief taken from this chat's memory: one world's, or one channel's since a moment.

What may go in is decided by memory (engine.memory.snapshot), as the asking channel's ``Viewer``
reads: a world of an audience that channel does not read is not found at all (the same answer as
a world that does not exist), and messages of members who opted out never go in. The brief
quotes the messages as written, with author and time, and lists the current beliefs resting on
them; the simulation made of it takes the asking channel's audience like any other.
"""
from __future__ import annotations

from datetime import datetime

from engine.config import Config
from engine.jobs import JobError
from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.memory.models import utcnow
from engine.sim.seed.brief import Brief, BriefLine, one_line


class NoSuchWorld(JobError):
    """The world named is not one the asking channel may read (or does not exist)."""

    resumable = False


class NothingLeft(JobError):
    """Every line of a brief from memory was forgotten before a run read it: nothing to simulate."""

    resumable = False

    def __init__(self, sim_id: str | None = None):
        which = f"the brief of simulation {sim_id}" if sim_id else "the brief"
        super().__init__(f"nothing is left of {which}: every line of it was forgotten at its authors' request.")


async def world_brief(memory: MemoryEngine, config: Config, viewer: Viewer, name_or_id: str,
                      since: datetime | None = None) -> Brief:
    """The brief of the world ``name_or_id`` as ``viewer`` reads it (NoSuchWorld when it sees none)."""
    found = await memory.world(viewer, name_or_id)
    if found is None:
        raise NoSuchWorld(f"no world matches {name_or_id!r}. /worlds lists them.")
    world = found[0]
    snap = await memory.snapshot(viewer, world_id=world.id, since=since,
                                 limit=config.simulation.brief_max_messages)
    source = f"the world “{world.topic or 'untitled'}” ({world.id})" + (f" since {since:%Y-%m-%d %H:%M}"
                                                                         if since else "")
    return _brief(snap, source, config, world.audience, f"world {world.id} holds nothing here to simulate from"
                  + (" since then" if since else ""))


async def chat_brief(memory: MemoryEngine, config: Config, viewer: Viewer, channel: str,
                     since: datetime) -> Brief:
    """The brief of ``channel``'s messages since ``since`` as ``viewer`` (that channel) reads them."""
    snap = await memory.snapshot(viewer, channel=channel, since=since, limit=config.simulation.brief_max_messages)
    return _brief(snap, f"this channel since {since:%Y-%m-%d %H:%M} UTC", config,
                  await memory.audience_of(viewer.scope, channel),
                  "memory holds nothing of this channel since then to simulate from")


def _brief(snap, source: str, config: Config, audience: str, empty: str) -> Brief:
    if not snap.messages:
        raise JobError(empty + (" (the messages there are of members who turned memory off for themselves)"
                                if snap.left_out else ""))
    lines = [BriefLine("belief", b.id, b.sources, ", ".join(b.authors), utcnow(), one_line(b.text))
             for b in snap.beliefs]
    lines += [BriefLine("message", m.id, (m.id,), one_line(m.author) or "someone", m.ts, one_line(m.text))
              for m in snap.messages]
    return Brief("memory", source, utcnow(), lines=lines, left_out=snap.left_out, more=snap.more,
                 zone=config.memory.timezone, audience=audience)


async def stale_lines(memory: MemoryEngine, scope: str, brief: Brief) -> list[tuple[str, int]]:
    """The lines (kind, memory id) of a brief from memory that memory no longer holds as taken,
    or whose authors opted out since (engine.memory.snapshot.still_held)."""
    messages = {line.source_id: line.ts for line in brief.messages}
    beliefs = {line.source_id: (line.text, line.sources) for line in brief.beliefs}
    held_messages, held_beliefs = await memory.still_held(scope, messages, beliefs)
    return ([("message", i) for i in messages if i not in held_messages]
            + [("belief", i) for i in beliefs if i not in held_beliefs])
