"""What memory holds about one member of a scope, and what the member controls of it.

- **Opt-outs** (table ``memory_optouts``, owned here): a member who turned memory off for
  themselves in a scope (/memory off me). ``withhold`` picks out the messages that must not be
  stored: by author id, and, for a message that carries none (history imported from an export
  without ids), by the name the member last had in that scope (case and spacing folded). The
  engine applies it in ``MemoryEngine.ingest_many``, the one way into storage for live messages,
  Discord's backfill, Telegram's replayed inbox and imports alike. What was stored before stays
  until the member forgets it (/forget me).
- **About** (``about``): what /me shows: how many of the member's messages memory holds, the
  worlds they talk in most, the current beliefs resting on their messages and those naming them.
  Content is limited to what the asking channel's audience may read; the count of their messages
  elsewhere is only a number.
- **Export** (``export_member``, ``write_export``): every message of the member in the scope
  and every belief resting on one of them (history included), as JSON and Markdown, for the
  member alone (/export me) or the operator (``python -m bot export``).
- **Naming one thing** (``find_message``, ``find_belief``): what /forget message and /forget
  belief point at, among what the asking channel's audience may read (a member's own messages
  anywhere in the scope too), so nothing else can be probed for. Forgetting itself is the engine's
  one forgetting path (``MemoryEngine.forget_messages``, ``forget_belief``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable

from engine.db import Database
from engine.i18n import _
from engine.memory import beliefs as belief_store, records
from engine.memory.audience import Viewer, message_audience
from engine.memory.beliefs import norm
from engine.memory.models import Belief, MemoryMessage, WorldInfo, iso, parse_ts, utcnow
from engine.memory.retrieval import world_infos
from engine.words import plural

LISTED = 10          # beliefs of each kind /me lists
TOP_WORLDS = 5       # worlds /me lists


def name_key(name: str) -> str:
    """A name as opt-outs compare it: case and spacing folded."""
    return " ".join(name.casefold().split())


# -- opt-outs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class OptOut:
    scope: str
    author_id: str
    author_name: str
    since: datetime


async def opt_out(db: Database, scope: str, author_id: str, author_name: str) -> OptOut:
    """Stop storing ``author_id``'s messages in ``scope`` (their name is kept current for imports)."""
    now = iso(utcnow())
    await db.execute(
        "INSERT INTO memory_optouts(scope, author_id, author_name, since) VALUES (?,?,?,?) "
        "ON CONFLICT(scope, author_id) DO UPDATE SET author_name=excluded.author_name",
        (scope, author_id, author_name, now))
    return await opt_out_of(db, scope, author_id) or OptOut(scope, author_id, author_name, parse_ts(now))


async def opt_in(db: Database, scope: str, author_id: str) -> bool:
    """Store ``author_id``'s messages in ``scope`` again; False when they had not opted out."""
    async with db.transaction() as conn:
        async with conn.execute("DELETE FROM memory_optouts WHERE scope=? AND author_id=? RETURNING author_id",
                                (scope, author_id)) as cur:
            return bool(await cur.fetchall())


async def opt_out_of(db: Database, scope: str, author_id: str) -> OptOut | None:
    row = await db.fetchone("SELECT scope, author_id, author_name, since FROM memory_optouts "
                            "WHERE scope=? AND author_id=?", (scope, author_id))
    return OptOut(row["scope"], row["author_id"], row["author_name"], parse_ts(row["since"])) if row else None


async def opted_out(db: Database, scope: str) -> list[OptOut]:
    """Every member of ``scope`` whose messages are not stored, oldest opt-out first."""
    rows = await db.fetchall("SELECT scope, author_id, author_name, since FROM memory_optouts WHERE scope=? "
                             "ORDER BY since, author_id", (scope,))
    return [OptOut(r["scope"], r["author_id"], r["author_name"], parse_ts(r["since"])) for r in rows]


@dataclass
class Withheld:
    """Messages left out because their authors opted out: matched by id, or by name where the
    message carries no author id (imported history)."""
    by_id: int = 0
    by_name: int = 0

    @property
    def total(self) -> int:
        return self.by_id + self.by_name

    def add(self, other: "Withheld") -> None:
        self.by_id += other.by_id
        self.by_name += other.by_name


async def withhold(db: Database, messages: list[MemoryMessage]) -> tuple[list[MemoryMessage], Withheld]:
    """The messages that may be stored, and how many were left out because their author opted out
    of memory in their scope (one indexed read per scope of ``messages``)."""
    scopes = sorted({m.scope for m in messages})
    ids: set[tuple[str, str]] = set()
    names: set[tuple[str, str]] = set()
    for i in range(0, len(scopes), 500):
        part = scopes[i:i + 500]
        for r in await db.fetchall(f"SELECT scope, author_id, author_name FROM memory_optouts WHERE scope IN "
                                   f"({','.join('?' * len(part))})", part):
            ids.add((r["scope"], r["author_id"]))
            if key := name_key(r["author_name"]):
                names.add((r["scope"], key))
    if not ids:
        return messages, Withheld()
    kept, left = [], Withheld()
    for m in messages:
        if m.author_id and (m.scope, m.author_id) in ids:
            left.by_id += 1
        elif not m.author_id and (m.scope, name_key(m.author)) in names:
            left.by_name += 1
        else:
            kept.append(m)
    return kept, left


# -- about one member ----------------------------------------------------------------------

@dataclass
class About:
    """What /me shows (see ``about``)."""
    messages: int = 0                  # their messages in channels the viewer reads
    elsewhere: int = 0                 # their messages in channels it does not read (a count only)
    first: datetime | None = None
    last: datetime | None = None
    worlds: list[tuple[WorldInfo, int]] = field(default_factory=list)   # busiest first, with their count
    resting: list[Belief] = field(default_factory=list)   # current beliefs resting on their messages
    resting_total: int = 0
    naming: list[Belief] = field(default_factory=list)    # current beliefs naming them
    naming_total: int = 0
    opt_out: OptOut | None = None


def names_them(belief: Belief, name: str) -> bool:
    """Whether the belief's subject or object names the member: their whole name, or its first
    word when that has three letters or more, as whole words."""
    words = norm(name).split()
    if not words:
        return False
    wanted = [words] + ([words[:1]] if len(words) > 1 and len(words[0]) >= 3 else [])
    for text in (belief.subject, belief.object):
        tokens = norm(text).split()
        for phrase in wanted:
            if any(tokens[i:i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1)):
                return True
    return False


async def about(db: Database, viewer: Viewer, author_id: str, author_name: str) -> About:
    """What memory holds about one member in the viewer's scope, limited to what the viewer's
    audience reads (their messages elsewhere are counted, never shown)."""
    out = About(opt_out=await opt_out_of(db, viewer.scope, author_id))
    sees, seen = viewer.where(message_audience())
    mine = await records.by_author(db, viewer.scope, author_id, sees, seen)
    total = await records.count_by_author(db, viewer.scope, author_id)
    out.messages, out.elsewhere = len(mine), total - len(mine)
    if mine:
        stamps = sorted(parse_ts(r["ts"]) for r in mine)
        out.first, out.last = stamps[0], stamps[-1]
    counts: dict[str, int] = {}
    for r in mine:
        if r["world_id"] is not None:   # a pending message has no world yet
            counts[r["world_id"]] = counts.get(r["world_id"], 0) + 1
    busiest = sorted(counts, key=lambda w: (-counts[w], w))[:TOP_WORLDS]
    infos = {w.id: w for w in await world_infos(db, viewer, busiest, archived=True)}
    out.worlds = [(infos[w], counts[w]) for w in busiest if w in infos]
    ids = {r["id"] for r in mine}
    belief_sees, seen = viewer.where("w.audience")
    current = await belief_store.seen_current(db, viewer.scope, belief_sees, seen)
    resting = [b for b in current if ids.intersection(b.sources)]
    naming = [b for b in current if names_them(b, author_name)]
    out.resting, out.resting_total = resting[:LISTED], len(resting)
    out.naming, out.naming_total = naming[:LISTED], len(naming)
    return out


# -- export --------------------------------------------------------------------------------

async def export_member(db: Database, scope: str, author_id: str = "", author_name: str = "") -> dict:
    """Every message of one member in ``scope`` (by ``author_id``; with ``author_name``, also the
    messages without an author id under that name: imported history) and every belief resting on
    one of them, superseded and retired ones included, as one JSON-ready document."""
    if not author_id and not author_name:
        raise ValueError("export_member needs an author id or name")
    rows = await records.with_topics(db, scope)   # a pending message (no world yet) too
    key = name_key(author_name)
    mine = [r for r in rows if (author_id and r["author_id"] == author_id)
            or (key and not r["author_id"] and name_key(r["author"]) == key)]
    ids = {r["id"] for r in mine}
    beliefs = []
    for b in await belief_store.of_scope(db, scope):
        theirs = sorted(ids.intersection(b.sources))
        if theirs:
            beliefs.append({"id": b.id, "subject": b.subject, "predicate": b.predicate, "object": b.object,
                            "confidence": round(b.confidence, 4), "world_id": b.world_id,
                            "valid_from": iso(b.valid_from), "learned_at": iso(b.learned_at),
                            "superseded_at": iso(b.invalid_at) if b.invalid_at else None,
                            "retired_at": iso(b.retired_at) if b.retired_at else None,
                            "sources": theirs, "other_sources": len(set(b.sources) - ids)})
    names = sorted({r["author"] for r in mine})
    return {"scope": scope, "author_id": author_id, "author": author_name or (names[-1] if names else ""),
            "exported_at": iso(utcnow()),
            "messages": [{"id": r["id"], "message_id": r["message_id"], "channel": r["channel"],
                          "author": r["author"], "ts": r["ts"], "text": r["text"], "world_id": r["world_id"],
                          "world_topic": r["topic"]} for r in mine],
            "beliefs": beliefs}


def export_markdown(data: dict) -> str:
    """The export as a Markdown document: messages by channel, in order, then the beliefs; its
    headings and labels in the current language (the chat's, for /export me)."""
    who = data["author"] or data["author_id"]
    lines = [_("# What memory holds of {who} in {scope}", who=who, scope=data["scope"]), "",
             _("Exported {when} UTC: {messages}, {beliefs} resting on them.",
               when=data["exported_at"][:19].replace("T", " "),
               messages=plural(len(data["messages"]), "{n} message", "{n} messages"),
               beliefs=plural(len(data["beliefs"]), "{n} belief", "{n} beliefs")), ""]
    channels: dict[str, list[dict]] = {}
    for m in data["messages"]:
        channels.setdefault(m["channel"], []).append(m)
    for channel, messages in channels.items():
        lines += [_("## Channel {channel}", channel=channel), ""]
        lines += [f"- [M{m['id']}] {m['ts'][:16].replace('T', ' ')} ({m['world_topic'] or m['world_id']}): "
                  f"{m['text']}" for m in messages]
        lines.append("")
    if data["beliefs"]:
        lines += [_("## Beliefs resting on these messages"), ""]
        for b in data["beliefs"]:
            state = (_("superseded {date}", date=b["superseded_at"][:10]) if b["superseded_at"] else
                     _("retired {date}", date=b["retired_at"][:10]) if b["retired_at"] else _("current"))
            others = (plural(b["other_sources"], "; also rests on {n} other message",
                             "; also rests on {n} other messages") if b["other_sources"] else "")
            lines.append(f"- [B{b['id']}] {b['subject']} — {b['predicate']} — {b['object']} "
                         + _("(confidence {confidence}, {state}; from {sources}{others})",
                             confidence=f"{b['confidence']:.2f}", state=state,
                             sources=", ".join(f"M{s}" for s in b["sources"]), others=others))
    return "\n".join(lines).rstrip() + "\n"


def write_export(data: dict, folder: Path, stem: str) -> tuple[Path, Path]:
    """Write ``stem``.json and ``stem``.md into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    as_json, as_md = folder / f"{stem}.json", folder / f"{stem}.md"
    as_json.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    as_md.write_text(export_markdown(data), encoding="utf-8")
    return as_json, as_md


# -- naming one message or belief -------------------------------------------------------------

@dataclass(frozen=True)
class StoredMessage:
    id: int
    channel: str
    message_id: str
    author: str
    author_id: str
    text: str
    ts: datetime


async def find_message(db: Database, viewer: Viewer, asker_id: str, *, row_id: int | None = None,
                       platform_id: str | None = None, channel: str | None = None) -> StoredMessage | None:
    """A stored message by its memory id ([M..]) or its platform id (in ``channel`` first), among
    those the viewer's audience reads and the asker's own; None when there is none such."""
    sees, seen = viewer.where(message_audience())
    rows = await records.seen_or_own(db, viewer.scope, sees, seen, asker_id, row_id=row_id, platform_id=platform_id)
    if row_id is None:
        rows = sorted(rows, key=lambda r: r["channel"] != channel)   # the named channel's first
    if not rows:
        return None
    r = rows[0]
    return StoredMessage(r["id"], r["channel"], r["message_id"], r["author"], r["author_id"], r["text"],
                         parse_ts(r["ts"]))


async def find_belief(db: Database, viewer: Viewer, belief_id: int) -> tuple[Belief, set[str]] | None:
    """A belief the viewer's audience reads (retired or superseded ones too), with the author ids of
    the messages it rests on ('' for a message without one); None when there is none such."""
    sees, seen = viewer.where("w.audience")
    belief = await belief_store.seen_by_id(db, viewer.scope, belief_id, sees, seen)
    if belief is None:
        return None
    return belief, await authors_of(db, viewer.scope, belief.sources)


async def authors_of(db: Database, scope: str, message_ids: Iterable[int]) -> set[str]:
    """The author ids of these stored messages of ``scope``."""
    return {r["author_id"] for r in await records.by_ids(db, scope, set(message_ids), "DISTINCT author_id")}
