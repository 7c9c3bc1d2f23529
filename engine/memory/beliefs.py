"""Belief graph of a world: (subject, predicate, object) triples with confidence and history.

A belief seen again raises its confidence (noisy-or) instead of being duplicated. A belief
marked exclusive (the subject holds one object for that predicate at a time: lives in, works
at, meets on) ends the other objects' validity, and time decides the order, not the order of
extraction: a belief is valid from the time of its source messages, supersedes only what was
valid before that time, and when something with another object was stated after it (an old
message extracted late: an import, a backlog), it is stored already superseded by that newer
belief. So ``invalid_at`` is never before ``valid_from``, and superseded beliefs stay in the
history.

A belief lands in the world holding most of its source messages (``store``); the latest
source's world breaks a tie, so one extraction call can serve messages of many worlds.

Confidence decays with a half-life (``decay``); a belief decayed below the floor is retired
(``retire``): kept as history, out of recall, /world, maturity and digests (``in_recall``, the one
rule every query of current beliefs uses). Seen again, a retired belief is current again.

Every SQL statement on ``beliefs`` lives here (tests/test_sql_owners.py): the modules that move,
forget, refit, show and recall beliefs (audience, lifecycle, chattext, members, snapshot, topics,
retrieval) call the named functions at the end, which take ``db`` or ``conn`` first and a viewer's
audience filter as its SQL condition and values (audience.Viewer.where). So this module imports no
memory module above records, models and terms: each of those callers imports it.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

import aiosqlite
import numpy as np

from engine.db import Database
from engine.memory import records, terms
from engine.memory.models import Belief, belief_text, iso, parse_ts, to_blob

_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)

BELIEF_COLUMNS = ("id, world_id, subject, predicate, object, confidence, sources, learned_at, "
                  "valid_from, invalid_at, superseded_by, retired_at")
_B_COLUMNS = ", ".join(f"b.{c.strip()}" for c in BELIEF_COLUMNS.split(","))   # the same, of ``beliefs b``


def in_recall(alias: str = "") -> str:
    """The SQL condition of a current belief (neither superseded nor retired); ``alias``: 'b.'."""
    return f"{alias}invalid_at IS NULL AND {alias}retired_at IS NULL"


def norm(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def combine(a: float, b: float) -> float:
    """Confidence of two independent sightings."""
    return 1.0 - (1.0 - a) * (1.0 - b)


@dataclass
class NewBelief:
    subject: str
    predicate: str
    object: str
    confidence: float
    exclusive: bool
    sources: list[int]            # memory_messages ids
    valid_from: datetime
    terms: str = ""               # its search tokens (belief_terms; ``fit`` fills them)

    def text(self) -> str:
        return belief_text(self.subject, self.predicate, self.object)

    def fit(self) -> None:
        """Compute its search tokens (CPU work: run it off the event loop)."""
        self.terms = belief_terms(self.subject, self.predicate, self.object)


def belief_terms(subject: str, predicate: str, obj: str) -> str:
    """A belief's tokens: its three parts, stemmed in their language (engine.memory.terms)."""
    text = f"{subject} {predicate} {obj}"
    return " ".join(terms.index_terms(text, terms.detect_language(text)))


def belief_from_row(row) -> Belief:
    return Belief(
        id=row["id"], world_id=row["world_id"], subject=row["subject"], predicate=row["predicate"],
        object=row["object"], confidence=row["confidence"], sources=json.loads(row["sources"]),
        learned_at=parse_ts(row["learned_at"]), valid_from=parse_ts(row["valid_from"]),
        invalid_at=parse_ts(row["invalid_at"]) if row["invalid_at"] else None,
        superseded_by=row["superseded_by"], retired_at=parse_ts(row["retired_at"]) if row["retired_at"] else None)


async def apply(conn: aiosqlite.Connection, scope: str, world_id: str, beliefs: list[NewBelief],
                embeddings: np.ndarray, now: datetime) -> dict[str, int]:
    """Add beliefs to a world inside the caller's transaction; returns counts by outcome (new,
    reinforced, superseded: older beliefs it ended; outdated: stored already superseded)."""
    counts = {"new": 0, "reinforced": 0, "superseded": 0, "outdated": 0}
    for belief, vec in zip(beliefs, embeddings):
        key = f"{norm(belief.subject)}|{norm(belief.predicate)}"
        obj = norm(belief.object)
        if not key.strip("|") or not obj:
            continue
        conf = min(max(float(belief.confidence), 0.0), 1.0)
        at = _utc(belief.valid_from)
        async with conn.execute(
                "SELECT id, norm_object, confidence, sources, valid_from, invalid_at FROM beliefs "
                "WHERE world_id=? AND norm_key=? ORDER BY valid_from, id", (world_id, key)) as cur:
            timeline = [_Held(r["id"], r["norm_object"], r["confidence"], r["sources"], parse_ts(r["valid_from"]),
                              parse_ts(r["invalid_at"]) if r["invalid_at"] else None) for r in await cur.fetchall()]
        same = _same_fact(timeline, obj, at, belief.exclusive)
        if same is not None:
            sources = sorted(set(json.loads(same.sources)) | set(belief.sources))
            await conn.execute(  # seen again: current again if it had been retired
                "UPDATE beliefs SET confidence=?, sources=?, decayed_at=?, retired_at=NULL WHERE id=?",
                (combine(same.confidence, conf), json.dumps(sources), iso(now), same.id))
            counts["reinforced"] += 1
            continue
        others = [h for h in timeline if h.obj != obj]
        # The first other value stated after this one ends it at once.
        later = next((h for h in others if h.valid_from > at), None) if belief.exclusive else None
        async with conn.execute(
            "INSERT INTO beliefs(scope, world_id, subject, predicate, object, norm_key, norm_object,"
            " confidence, sources, learned_at, valid_from, invalid_at, superseded_by, decayed_at, embedding,"
            " search_terms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            (scope, world_id, belief.subject.strip(), belief.predicate.strip(), belief.object.strip(),
             key, obj, conf, json.dumps(sorted(set(belief.sources))), iso(now), iso(at),
             iso(later.valid_from) if later else None, later.id if later else None, iso(now), to_blob(vec),
             belief.terms)) as cur:
            inserted = await cur.fetchone()
            assert inserted is not None  # RETURNING gives the row
            new_id = inserted[0]
        counts["new"] += 1
        counts["outdated"] += later is not None
        if belief.exclusive:
            # What held at that time ends there (an old value still active, or a past one whose
            # validity this statement cuts short).
            ended = [h.id for h in others if h.valid_from <= at and (h.invalid_at is None or h.invalid_at > at)]
            if ended:
                await conn.executemany("UPDATE beliefs SET invalid_at=?, superseded_by=? WHERE id=?",
                                       [(iso(at), new_id, i) for i in ended])
                counts["superseded"] += len(ended)
    return counts


@dataclass
class _Held:
    """A stored belief with the same subject and predicate, as the timeline sees it."""
    id: int
    obj: str
    confidence: float
    sources: str
    valid_from: datetime
    invalid_at: datetime | None

    def holds_at(self, at: datetime) -> bool:
        return self.valid_from <= at and (self.invalid_at is None or self.invalid_at > at)


def _same_fact(timeline: list[_Held], obj: str, at: datetime, exclusive: bool) -> _Held | None:
    """The stored belief a new statement of ``obj`` at ``at`` confirms: the one holding at that
    time, else the active one, unless (for an exclusive belief) another value was stated in
    between, which makes this an earlier episode of its own."""
    same = [h for h in timeline if h.obj == obj]
    held = next((h for h in same if h.holds_at(at)), None)
    if held is not None:
        return held
    active = next((h for h in same if h.invalid_at is None), None)
    if active is None:
        return None
    if exclusive and any(h.obj != obj and at <= h.valid_from < active.valid_from for h in timeline):
        return None
    return active


def _utc(ts: datetime) -> datetime:
    return parse_ts(iso(ts))


def home_world(source_worlds: list[str]) -> str:
    """The world of most sources (in chat order); a tie goes to the latest source's world."""
    counts = Counter(source_worlds)
    best = max(counts.values())
    return next(w for w in reversed(source_worlds) if counts[w] == best)


async def store(conn: aiosqlite.Connection, scope: str, found: list[NewBelief], embeddings,
                now: datetime) -> set[str]:
    """Add extracted beliefs, each to the world that holds its source messages now (a merge or an
    audience change may have moved them since they were read); sources forgotten meanwhile, or not
    routed to a world yet (stored first, embedded later: engine.memory.pending), are dropped, and a
    belief with none left is. Returns the worlds that changed."""
    where = await records.routed_worlds(conn, scope, sorted({s for b in found for s in b.sources}))
    touched: set[str] = set()
    for belief, vec in zip(found, embeddings):
        kept = sorted(s for s in set(belief.sources) if s in where)
        if not kept:
            continue
        world = home_world([where[s] for s in kept])
        belief.sources = kept
        await apply(conn, scope, world, [belief], np.asarray([vec]), now)
        touched.add(world)
    return touched


async def fold_duplicates(conn: aiosqlite.Connection, world_id: str) -> int:
    """After a merge: active beliefs stating the same thing become one (confidence combined)."""
    async with conn.execute(
            "SELECT id, norm_key, norm_object, confidence, sources FROM beliefs "
            "WHERE world_id=? AND invalid_at IS NULL ORDER BY id", (world_id,)) as cur:
        rows = await cur.fetchall()
    first: dict[tuple[str, str], list] = {}
    folded = 0
    for row in rows:
        k = (row["norm_key"], row["norm_object"])
        if k not in first:
            first[k] = [row["id"], row["confidence"], set(json.loads(row["sources"]))]
            continue
        keep = first[k]
        keep[1] = combine(keep[1], row["confidence"])
        keep[2] |= set(json.loads(row["sources"]))
        await conn.execute("UPDATE beliefs SET superseded_by=? WHERE superseded_by=?", (keep[0], row["id"]))
        await conn.execute("DELETE FROM beliefs WHERE id=?", (row["id"],))
        await conn.execute("UPDATE beliefs SET confidence=?, sources=? WHERE id=?",
                           (keep[1], json.dumps(sorted(keep[2])), keep[0]))
        folded += 1
    return folded


async def world_maturity_inputs(db: Database, world_ids: list[str]) -> dict[str, tuple[float, int]]:
    """world id -> (average active confidence, active belief count)."""
    out: dict[str, tuple[float, int]] = {}
    for i in range(0, len(world_ids), 500):
        chunk = world_ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for row in await db.fetchall(
                f"SELECT world_id, avg(confidence) AS c, count(*) AS n FROM beliefs WHERE world_id IN ({marks})"
                f" AND {in_recall()} GROUP BY world_id", chunk):
            out[row["world_id"]] = (row["c"], row["n"])
    return out


async def decay(conn: aiosqlite.Connection, scope: str | None, now: datetime, half_life_days: float) -> int:
    """Halve current confidences every half-life since they were last seen or decayed."""
    where, params = (f"WHERE {in_recall()} AND scope=?", (scope,)) if scope else (f"WHERE {in_recall()}", ())
    async with conn.execute(f"SELECT id, confidence, decayed_at FROM beliefs {where}", params) as cur:
        rows = await cur.fetchall()
    updates = []
    for row in rows:
        days = (now - parse_ts(row["decayed_at"])).total_seconds() / 86400.0
        if days > 0:
            updates.append((row["confidence"] * 0.5 ** (days / half_life_days), iso(now), row["id"]))
    if updates:
        await conn.executemany("UPDATE beliefs SET confidence=?, decayed_at=? WHERE id=?", updates)
    return len(updates)


async def retire(conn: aiosqlite.Connection, scope: str, floor: float, now: datetime) -> int:
    """Retire the scope's current beliefs whose confidence decayed below ``floor``: they stay as
    history (with when they were retired) and leave recall. Returns how many."""
    async with conn.execute(f"UPDATE beliefs SET retired_at=? WHERE scope=? AND {in_recall()} AND confidence < ? "
                            "RETURNING id", (iso(now), scope, floor)) as cur:
        return len(list(await cur.fetchall()))


async def learned_since(db: Database, scope: str, since: str) -> list[Any]:
    """The scope's beliefs in recall learned at or after ``since`` (ISO), in order."""
    return await db.fetchall(
        "SELECT id, world_id, subject, predicate, object, confidence FROM beliefs WHERE scope=? "
        f"AND learned_at>=? AND {in_recall()} ORDER BY learned_at, id", (scope, since))


async def superseded_since(db: Database, scope: str, since: str) -> list[Any]:
    """The scope's beliefs superseded by one learned at or after ``since`` (ISO): the old one's world,
    invalid_at and triple (os, op, oo) beside the new one's world and triple (ns, np, no)."""
    return await db.fetchall(
        "SELECT o.world_id, n.world_id AS new_world, o.subject AS os, o.predicate AS op, o.object AS oo, "
        "o.invalid_at, n.subject AS ns, n.predicate AS np, n.object AS no FROM beliefs o JOIN beliefs n "
        "ON n.id = o.superseded_by WHERE o.scope=? AND n.learned_at>=? ORDER BY n.learned_at, n.id",
        (scope, since))


async def set_search_terms(conn: aiosqlite.Connection, rows: Iterable[tuple[str, int]]) -> None:
    """Beliefs refitted (engine.memory.chattext.fit_stored): (search_terms, id)."""
    await conn.executemany("UPDATE beliefs SET search_terms=? WHERE id=?", rows)


# -- rows for the modules that move, forget and rename worlds (audience, lifecycle) -----------

async def oldest_text(conn: aiosqlite.Connection, world_id: str) -> str | None:
    """The statement of the world's oldest belief, its three parts spaced; None when it holds none."""
    async with conn.execute("SELECT subject || ' ' || predicate || ' ' || object AS text FROM beliefs "
                            "WHERE world_id=? ORDER BY id LIMIT 1", (world_id,)) as cur:
        row = await cur.fetchone()
    return row["text"] if row is not None else None


async def sourced(conn: aiosqlite.Connection, scope: str) -> list[tuple[int, str, list[int]]]:
    """(id, world id, source message ids) of every belief of the scope."""
    async with conn.execute("SELECT id, world_id, sources FROM beliefs WHERE scope=?", (scope,)) as cur:
        return [(r["id"], r["world_id"], json.loads(r["sources"])) for r in await cur.fetchall()]


async def set_sources(conn: aiosqlite.Connection, belief_id: int, sources: list[int]) -> None:
    """The belief rests on ``sources`` (message ids) now."""
    await conn.execute("UPDATE beliefs SET sources=? WHERE id=?", (json.dumps(sources), belief_id))


async def set_world(conn: aiosqlite.Connection, belief_id: int, world_id: str) -> None:
    await conn.execute("UPDATE beliefs SET world_id=? WHERE id=?", (world_id, belief_id))


async def copy_to(conn: aiosqlite.Connection, belief_id: int, world_id: str, sources: list[int]) -> None:
    """A copy of the belief (its statement, confidence, times, vector and tokens) in world ``world_id``,
    resting on ``sources``; the copy supersedes nothing and is superseded by nothing."""
    await conn.execute(
        "INSERT INTO beliefs(scope, world_id, subject, predicate, object, norm_key, norm_object, confidence,"
        " sources, learned_at, valid_from, invalid_at, decayed_at, embedding, search_terms) "
        "SELECT scope, ?, subject, predicate, object, norm_key, norm_object, confidence, ?, learned_at,"
        " valid_from, invalid_at, decayed_at, embedding, search_terms FROM beliefs WHERE id=?",
        (world_id, json.dumps(sources), belief_id))


async def unlink_outside(conn: aiosqlite.Connection, scope: str, ids: list[int]) -> None:
    """No supersession link of the scope joins a belief among ``ids`` to one outside them, either way."""
    marks = ",".join("?" * len(ids))
    await conn.execute(f"UPDATE beliefs SET superseded_by=NULL WHERE scope=? AND superseded_by IN ({marks}) "
                       f"AND id NOT IN ({marks})", (scope, *ids, *ids))
    await conn.execute(f"UPDATE beliefs SET superseded_by=NULL WHERE id IN ({marks}) "
                       f"AND superseded_by NOT IN ({marks})", (*ids, *ids))


async def move_world(conn: aiosqlite.Connection, from_id: str, to_id: str) -> None:
    """Every belief of world ``from_id`` lies in world ``to_id`` now."""
    await conn.execute("UPDATE beliefs SET world_id=? WHERE world_id=?", (to_id, from_id))


async def delete(conn: aiosqlite.Connection, belief_id: int) -> None:
    """Delete a belief; what it superseded is no longer superseded by anything."""
    await conn.execute("UPDATE beliefs SET superseded_by=NULL WHERE superseded_by=?", (belief_id,))
    await conn.execute("DELETE FROM beliefs WHERE id=?", (belief_id,))


async def embeddings_of(conn: aiosqlite.Connection, world_id: str) -> list[Any]:
    """The embeddings of the world's beliefs."""
    async with conn.execute("SELECT embedding FROM beliefs WHERE world_id=?", (world_id,)) as cur:
        return list(await cur.fetchall())


# -- reads for the modules that show beliefs (members, snapshot, topics, retrieval) ------------

async def seen_current(db: Database, scope: str, sees: str, seen: Sequence[str],
                       world_id: str | None = None) -> list[Belief]:
    """The scope's current beliefs (of world ``world_id`` only, when given) in worlds whose audience
    meets ``sees`` (a condition on ``w.audience`` with its values ``seen``: audience.Viewer.where),
    most confident first."""
    one_world, world_params = ("AND b.world_id=?", [world_id]) if world_id is not None else ("", [])
    return [belief_from_row(r) for r in await db.fetchall(
        f"SELECT {_B_COLUMNS} FROM beliefs b "
        f"JOIN worlds w ON w.id = b.world_id WHERE b.scope=? AND {in_recall('b.')} AND {sees} {one_world} "
        "ORDER BY b.confidence DESC, b.id", (scope, *seen, *world_params))]


async def seen_by_id(db: Database, scope: str, belief_id: int, sees: str, seen: Sequence[str]) -> Belief | None:
    """The scope's belief ``belief_id`` (retired or superseded too) if its world's audience meets
    ``sees`` (with its values ``seen``); None otherwise."""
    row = await db.fetchone(
        f"SELECT {_B_COLUMNS} FROM beliefs b "
        f"JOIN worlds w ON w.id = b.world_id WHERE b.scope=? AND b.id=? AND {sees}",
        (scope, belief_id, *seen))
    return belief_from_row(row) if row is not None else None


async def of_scope(db: Database, scope: str) -> list[Belief]:
    """Every belief of the scope, superseded and retired ones too, in order."""
    return [belief_from_row(r) for r in
            await db.fetchall(f"SELECT {BELIEF_COLUMNS} FROM beliefs WHERE scope=? ORDER BY id", (scope,))]


async def by_ids(db: Database, scope: str, ids: Sequence[int]) -> list[Belief]:
    """The scope's beliefs among ``ids`` (sorted) that memory still holds."""
    found: list[Belief] = []
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        found += [belief_from_row(r) for r in await db.fetchall(
            f"SELECT {BELIEF_COLUMNS} FROM beliefs WHERE scope=? AND id IN ({','.join('?' * len(part))})",
            (scope, *part))]
    return found


async def strongest(db: Database, world_id: str, n: int) -> list[Any]:
    """(subject, predicate, object) of the world's ``n`` most confident current beliefs."""
    return await db.fetchall(
        f"SELECT subject, predicate, object FROM beliefs WHERE world_id=? AND {in_recall()} "
        "ORDER BY confidence DESC, id LIMIT ?", (world_id, n))


async def candidates(db: Database, scope: str, ids: Sequence[int], sees: str, seen: Sequence[str]) -> list[Any]:
    """The rows (``BELIEF_COLUMNS`` and the embedding) of the scope's current beliefs among ``ids`` in
    worlds whose audience meets ``sees`` (with its values ``seen``): recall's candidates."""
    # CROSS JOIN keeps SQLite on the belief rows first (by id); "(b.scope || '')" stops it from walking
    # the whole scope's index instead. Both are plain SQL to PostgreSQL, whose planner takes neither as
    # a hint (it rejects SQLite's "CROSS JOIN .. ON" and "+text", hence these forms).
    return await db.fetchall(
        f"SELECT {_B_COLUMNS}, b.embedding FROM beliefs b CROSS JOIN worlds w WHERE w.id = b.world_id "
        f"AND b.id IN ({','.join('?' * len(ids))}) AND (b.scope || '')=? AND {in_recall('b.')} AND {sees}",
        (*ids, scope, *seen))


async def of_world(db: Database, scope: str, world_id: str) -> list[Belief]:
    """The beliefs of a world of the scope, superseded ones too but not retired ones, newest first."""
    rows = await db.fetchall(
        f"SELECT {BELIEF_COLUMNS} FROM beliefs WHERE world_id=? AND scope=? AND retired_at IS NULL "
        "ORDER BY learned_at DESC, id DESC", (world_id, scope))
    return [belief_from_row(r) for r in rows]
