"""What a simulation's brief may take from memory: a snapshot of one world or one channel.

``take`` reads, as a ``Viewer`` reads (the scope and the asking channel's audience: the SQL filters
by the viewer like recall, so a restricted audience's world or messages never reach a brief asked
for elsewhere), either one world's messages (every channel of it) or one channel's messages (in
every world the viewer sees), the latest ``limit`` of them after ``since``, oldest first, each with
its author, channel and time; and the current beliefs (neither superseded nor retired) of that
world, or those resting on the channel's messages taken, each with who said what it rests on.

Members own their words: a message whose author opted out of memory in the scope (members'
``memory_optouts``: by author id, or by name where the message has none) is left out, and so is
a belief resting on any message of theirs, even though what was stored before the opt-out still
stands in memory itself. Forgotten messages are gone from the tables, so they cannot be taken;
the copies a brief already took are removed through ``MemoryEngine.on_forget``, and
``still_held`` checks a snapshot again before a simulation is made of it (the ids of SQLite rows
can be reused, so a line is held only while its id still holds the message written at the same
time, or the belief with the same statement).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from engine.db import Database
from engine.memory import beliefs as belief_store, records
from engine.memory.audience import Viewer
from engine.memory.members import name_key, opted_out
from engine.memory.models import iso, parse_ts

LIMIT = 200            # messages a snapshot takes at most (the latest ones)
BELIEFS = 60           # beliefs a snapshot takes at most (the most confident ones)


@dataclass(frozen=True)
class SnapMessage:
    id: int
    author_id: str
    author: str
    channel: str
    text: str
    ts: datetime


@dataclass(frozen=True)
class SnapBelief:
    id: int
    text: str                         # subject predicate object
    confidence: float
    sources: tuple[int, ...]
    authors: tuple[str, ...]          # who wrote the messages it rests on, as far as memory holds them


@dataclass
class Snapshot:
    messages: list[SnapMessage] = field(default_factory=list)
    beliefs: list[SnapBelief] = field(default_factory=list)
    left_out: int = 0                 # messages of members who opted out
    more: bool = False                # older messages than ``limit`` were left out

    def __bool__(self) -> bool:
        return bool(self.messages or self.beliefs)


class _OptOuts:
    def __init__(self, rows) -> None:
        self.ids = {r.author_id for r in rows}
        self.names = {key for r in rows if (key := name_key(r.author_name))}

    def out(self, author_id: str, author: str) -> bool:
        return author_id in self.ids if author_id else name_key(author) in self.names


async def _authors(db: Database, scope: str, ids: set[int]) -> dict[int, tuple[str, str]]:
    """message id -> (author id, author name) for the messages memory still holds."""
    rows = await records.by_ids(db, scope, ids, "id, author_id, author")
    return {r["id"]: (r["author_id"], r["author"]) for r in rows}


async def take(db: Database, viewer: Viewer, *, world_id: str | None = None, channel: str | None = None,
               since: datetime | None = None, limit: int = LIMIT) -> Snapshot:
    """The snapshot of world ``world_id`` or of ``channel`` (exactly one of them), as ``viewer`` reads."""
    if (world_id is None) == (channel is None):
        raise ValueError("a snapshot is of one world or of one channel")
    sees, seen = viewer.where("w.audience")
    where, params = ("m.world_id=?", world_id) if world_id is not None else ("m.channel=?", channel)
    rows = await records.latest_seen(db, viewer.scope, where, params, sees, seen,
                                     iso(since) if since is not None else None, limit + 1)
    out = Snapshot(more=len(rows) > limit)
    optouts = _OptOuts(await opted_out(db, viewer.scope))
    for r in reversed(rows[:limit]):
        if optouts.out(r["author_id"], r["author"]):
            out.left_out += 1
        else:
            out.messages.append(SnapMessage(r["id"], r["author_id"], r["author"], r["channel"], r["text"],
                                            parse_ts(r["ts"])))
    bsees, bseen = viewer.where("w.audience")
    beliefs = await belief_store.seen_current(db, viewer.scope, bsees, bseen, world_id)
    if channel is not None:   # the channel's: those resting on a message taken
        taken = {m.id for m in out.messages}
        beliefs = [b for b in beliefs if taken.intersection(b.sources)]
    authors = await _authors(db, viewer.scope, {s for b in beliefs for s in b.sources})
    for b in beliefs:
        said = [authors[s] for s in b.sources if s in authors]
        if any(optouts.out(*who) for who in said):
            continue
        out.beliefs.append(SnapBelief(b.id, b.text(), b.confidence, tuple(b.sources),
                                      tuple(dict.fromkeys(name for _, name in said))))
        if len(out.beliefs) >= BELIEFS:
            break
    return out


async def still_held(db: Database, scope: str, messages: dict[int, datetime],
                     beliefs: dict[int, tuple[str, tuple[int, ...]]]) -> tuple[set[int], set[int]]:
    """The ids among ``messages`` (id -> when it was written) and ``beliefs`` (id -> its statement,
    spacing folded, and the messages it rested on) that memory still holds as a snapshot took
    them: a belief that lost one of those messages is not, nor anything whose author opted out
    since."""
    optouts = _OptOuts(await opted_out(db, scope))
    kept_messages: set[int] = set()
    for r in await records.by_ids(db, scope, messages, "id, author_id, author, ts"):
        if parse_ts(r["ts"]) == messages[r["id"]] and not optouts.out(r["author_id"], r["author"]):
            kept_messages.add(r["id"])
    kept_beliefs: set[int] = set()
    for belief in await belief_store.by_ids(db, scope, sorted(beliefs)):
        authors = await _authors(db, scope, set(belief.sources))
        statement, sources = beliefs[belief.id]
        if (" ".join(belief.text().split()) == statement and set(sources) <= set(belief.sources)
                and not any(optouts.out(*who) for who in authors.values())):
            kept_beliefs.add(belief.id)
    return kept_messages, kept_beliefs
