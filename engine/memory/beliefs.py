"""Belief graph of a world: (subject, predicate, object) triples with confidence and history.

A belief seen again raises its confidence (noisy-or) instead of being duplicated. A belief
marked exclusive (the subject holds one object for that predicate at a time: lives in, works
at, meets on) supersedes the active ones with another object: they get invalid_at and the id
of their successor, and stay in the history.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime

import aiosqlite
import numpy as np

from engine.memory.models import Belief, iso, parse_ts, to_blob

_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)

BELIEF_COLUMNS = ("id, world_id, subject, predicate, object, confidence, sources, learned_at, "
                  "valid_from, invalid_at, superseded_by")


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

    def text(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}"


def belief_from_row(row) -> Belief:
    return Belief(
        id=row["id"], world_id=row["world_id"], subject=row["subject"], predicate=row["predicate"],
        object=row["object"], confidence=row["confidence"], sources=json.loads(row["sources"]),
        learned_at=parse_ts(row["learned_at"]), valid_from=parse_ts(row["valid_from"]),
        invalid_at=parse_ts(row["invalid_at"]) if row["invalid_at"] else None,
        superseded_by=row["superseded_by"])


async def apply(conn: aiosqlite.Connection, scope: str, world_id: str, beliefs: list[NewBelief],
                embeddings: np.ndarray, now: datetime) -> dict[str, int]:
    """Add beliefs to a world inside the caller's transaction; returns counts by outcome."""
    counts = {"new": 0, "reinforced": 0, "superseded": 0}
    for belief, vec in zip(beliefs, embeddings):
        key = f"{norm(belief.subject)}|{norm(belief.predicate)}"
        obj = norm(belief.object)
        if not key.strip("|") or not obj:
            continue
        conf = min(max(float(belief.confidence), 0.0), 1.0)
        async with conn.execute(
                "SELECT id, confidence, sources FROM beliefs WHERE world_id=? AND norm_key=? AND "
                "norm_object=? AND invalid_at IS NULL", (world_id, key, obj)) as cur:
            same = await cur.fetchone()
        if same is not None:
            sources = sorted(set(json.loads(same["sources"])) | set(belief.sources))
            await conn.execute(
                "UPDATE beliefs SET confidence=?, sources=?, decayed_at=? WHERE id=?",
                (combine(same["confidence"], conf), json.dumps(sources), iso(now), same["id"]))
            counts["reinforced"] += 1
            continue
        cur = await conn.execute(
            "INSERT INTO beliefs(scope, world_id, subject, predicate, object, norm_key, norm_object,"
            " confidence, sources, learned_at, valid_from, decayed_at, embedding)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (scope, world_id, belief.subject.strip(), belief.predicate.strip(), belief.object.strip(),
             key, obj, conf, json.dumps(sorted(set(belief.sources))), iso(now), iso(belief.valid_from),
             iso(now), to_blob(vec)))
        new_id = cur.lastrowid
        await cur.close()
        counts["new"] += 1
        if belief.exclusive:
            cur = await conn.execute(
                "UPDATE beliefs SET invalid_at=?, superseded_by=? WHERE world_id=? AND norm_key=? "
                "AND norm_object<>? AND invalid_at IS NULL",
                (iso(belief.valid_from), new_id, world_id, key, obj))
            counts["superseded"] += cur.rowcount
            await cur.close()
    return counts


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


async def world_maturity_inputs(conn: aiosqlite.Connection, world_ids: list[str]) -> dict[str, tuple[float, int]]:
    """world id -> (average active confidence, active belief count)."""
    out: dict[str, tuple[float, int]] = {}
    for i in range(0, len(world_ids), 500):
        chunk = world_ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        async with conn.execute(
                f"SELECT world_id, avg(confidence) AS c, count(*) AS n FROM beliefs WHERE world_id IN ({marks})"
                " AND invalid_at IS NULL GROUP BY world_id", chunk) as cur:
            for row in await cur.fetchall():
                out[row["world_id"]] = (row["c"], row["n"])
    return out


async def decay(conn: aiosqlite.Connection, scope: str | None, now: datetime, half_life_days: float) -> int:
    """Halve active confidences every half-life since they were last seen or decayed."""
    where, params = ("WHERE invalid_at IS NULL AND scope=?", (scope,)) if scope else ("WHERE invalid_at IS NULL", ())
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
