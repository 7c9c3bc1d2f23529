"""Who may see which memory inside a scope: audiences, viewers and the channel -> audience map.

A scope (a Discord server, a Telegram chat) is split by *audience*. '' is the public audience,
what every member can read; any other key names a restricted audience (on Discord the id of the
channel, or of the private thread, that only some members can read). Messages of different
audiences never share a world, so a world, its topic, its beliefs and its digest entries all
belong to one audience. A viewer (a scope and the audience of the channel it asks from) sees
the public audience and its own, nothing else: every memory query takes a viewer and filters
with it in SQL or by choosing the audiences' centroid indexes.

The map records the audience each channel was last seen with. When a channel's audience
changes (a channel made private, a private one opened up), the engine moves the channel's
messages to the new audience's worlds, and ``move_beliefs`` makes the beliefs resting on them
follow, so nothing the old audience could read stays behind where the new one cannot see it,
or the other way round.
"""
from __future__ import annotations

from dataclasses import dataclass

import aiosqlite

from engine.db import Database
from engine.memory import beliefs as belief_store, records
from engine.memory.models import iso, utcnow
from engine.memory.topics import initial_topic

PUBLIC = ""



def message_audience(row: str = "m") -> str:
    """The audience a message row (alias ``row``, its world ``w`` LEFT JOINed) is read under: its
    world's, or, while it is pending (stored, not yet embedded and routed: engine.memory.pending),
    the audience stored on the row itself (migration 0032). Every query that may return pending
    messages filters by it."""
    return f"coalesce(w.audience, {row}.audience)"


@dataclass(frozen=True)
class Viewer:
    """Whoever a memory query answers: a scope and the audience of the channel asking.
    ``audience`` None is the operator at the command line, who sees every audience."""
    scope: str
    audience: str | None = PUBLIC

    @classmethod
    def of(cls, viewer: "Viewer | str") -> "Viewer":
        """A bare scope is that scope's public viewer: it sees only what every member can read."""
        return viewer if isinstance(viewer, Viewer) else cls(viewer)

    @classmethod
    def operator(cls, scope: str) -> "Viewer":
        return cls(scope, None)

    def sees(self, audience: str) -> bool:
        return self.audience is None or audience in (PUBLIC, self.audience)

    def where(self, column: str) -> tuple[str, list[str]]:
        """An SQL condition, with its parameters, keeping the rows whose ``column`` this viewer sees."""
        if self.audience is None:
            return "1=1", []
        visible = [PUBLIC] if self.audience == PUBLIC else [PUBLIC, self.audience]
        return f"{column} IN ({','.join('?' * len(visible))})", visible


async def recorded(db: Database, scope: str, channels: list[str]) -> dict[str, str]:
    """channel -> the audience it was last recorded with (channels never recorded are absent)."""
    out: dict[str, str] = {}
    for i in range(0, len(channels), 500):
        part = channels[i:i + 500]
        rows = await db.fetchall(
            f"SELECT channel, audience FROM channel_audiences WHERE scope=? AND channel IN "
            f"({','.join('?' * len(part))})", (scope, *part))
        out.update({r["channel"]: r["audience"] for r in rows})
    return out


async def record(conn: aiosqlite.Connection, scope: str, channel: str, audience: str) -> None:
    await conn.execute(
        "INSERT INTO channel_audiences(scope, channel, audience, changed_at) VALUES (?,?,?,?) "
        "ON CONFLICT(scope, channel) DO UPDATE SET audience=excluded.audience, changed_at=excluded.changed_at",
        (scope, channel, audience, iso(utcnow())))


async def rename_provisionally(conn: aiosqlite.Connection, world_id: str) -> None:
    """Name a world after its oldest remaining message (or, holding none, its oldest remaining
    belief) until topic naming runs again, so a name drawn from messages that moved to another
    audience, or were forgotten, does not outlive them."""
    text = await records.oldest_text(conn, world_id)
    if text is None:
        text = await belief_store.oldest_text(conn, world_id)
    if text is not None:
        await records.set_topic(conn, world_id, initial_topic(text))


async def move_beliefs(conn: aiosqlite.Connection, scope: str, moved: dict[int, str]) -> set[str]:
    """Make beliefs follow their source messages, which moved to other worlds (message id -> new
    world id). A belief resting only on moved messages moves to the world of its first source; one
    that also rests on messages that stayed is split: it keeps those sources where it is, and a
    copy with the moved sources goes along. Returns every world that lost or gained a belief."""
    touched: set[str] = set()
    if not moved:
        return touched
    arrived: set[str] = set()
    whole: list[int] = []   # beliefs that moved entirely
    for belief_id, world_id, sources in await belief_store.sourced(conn, scope):
        going = [s for s in sources if s in moved]
        if not going:
            continue
        staying = [s for s in sources if s not in moved]
        target = moved[going[0]]
        if target == world_id:
            continue
        touched |= {world_id, target}
        arrived.add(target)
        if not staying:
            await belief_store.set_world(conn, belief_id, target)
            whole.append(belief_id)
            continue
        await belief_store.set_sources(conn, belief_id, staying)
        await belief_store.copy_to(conn, belief_id, target, going)
    if whole:
        # A supersession link must not point from one audience into another.
        await belief_store.unlink_outside(conn, scope, whole)
    for world_id in arrived:
        await belief_store.fold_duplicates(conn, world_id)
    return touched
