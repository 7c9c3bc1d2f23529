"""The briefs of simulations started without a document: tables ``sim_briefs`` and
``sim_brief_lines`` (migrations/0028_sim_briefs.sql). Every SQL statement on them lives here.

``save`` keeps a brief when its simulation is made; ``load`` gives it back as a ``Brief``, from
which ``documents/brief.md`` is rendered again. ``drop_forgotten`` removes the lines resting on
what memory forgot (engine.memory.models.Forgotten): a message line whose message went, a belief
line whose belief or any message it rests on went. For a simulation whose run had already read
its brief (``read``), the lines go too and the count of lines forgotten after the run is kept;
for the others they simply go, counted as removed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from engine.db import Database
from engine.i18n import _
from engine.memory.models import Forgotten, iso, parse_ts
from engine.sim.seed.brief import FILE, Brief, BriefLine
from engine.words import plural


@dataclass(frozen=True)
class BriefState:
    origin: str            # "drafted" or "memory"
    source: str
    lines: int             # lines left
    removed: int           # lines forgotten before a run read the brief
    forgotten: int         # lines forgotten after a run had read it

    def describe(self) -> list[str]:
        """What /sim status says of the brief: what it is, and what its authors took back."""
        if self.origin == "drafted":
            return [_("{file}: drafted by the LLM from the question (no document was given)", file=FILE)]
        removed = (_(" ({lines} forgotten at their authors' request before the run read it)",
                     lines=plural(self.removed, "{n} line", "{n} lines")) if self.removed else "")
        lines = [_("{file}: taken from this chat's memory of {source}, {lines} left{removed}", file=FILE,
                   source=self.source, lines=plural(self.lines, "{n} line", "{n} lines"), removed=removed)]
        if self.forgotten:
            lines.append(_("⚠ built on {lines} of the chat that their authors have since asked the bot to forget: "
                           "gone from the brief, but the run had read them",
                           lines=plural(self.forgotten, "{n} line", "{n} lines")))
        return lines


async def save(db: Database, sim_id: str, brief: Brief) -> None:
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO sim_briefs(sim_id, origin, source, built_at, zone, left_out, more, removed)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (sim_id, brief.origin, brief.source, iso(brief.built_at), brief.zone, brief.left_out, int(brief.more),
             brief.removed))
        await conn.executemany(
            "INSERT INTO sim_brief_lines(sim_id, line, kind, source_id, sources, author, ts, text)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [(sim_id, n, line.kind, line.source_id, json.dumps(list(line.sources)), line.author, iso(line.ts),
              line.text) for n, line in enumerate(brief.lines)])


async def load(db: Database, sim_id: str) -> Brief | None:
    """The brief of ``sim_id`` as it stands (a drafted one without its text, which is its file)."""
    row = await db.fetchone("SELECT * FROM sim_briefs WHERE sim_id=?", (sim_id,))
    if row is None:
        return None
    rows = await db.fetchall("SELECT * FROM sim_brief_lines WHERE sim_id=? ORDER BY line", (sim_id,))
    lines = [BriefLine(r["kind"], r["source_id"], tuple(json.loads(r["sources"])), r["author"], parse_ts(r["ts"]),
                       r["text"]) for r in rows]
    return Brief(row["origin"], row["source"], parse_ts(row["built_at"]), lines=lines, left_out=row["left_out"],
                 more=bool(row["more"]), zone=row["zone"], removed=row["removed"])


async def state(db: Database, sim_id: str) -> BriefState | None:
    row = await db.fetchone(
        "SELECT b.origin, b.source, b.removed, b.forgotten, (SELECT count(*) FROM sim_brief_lines l"
        " WHERE l.sim_id = b.sim_id) AS lines FROM sim_briefs b WHERE b.sim_id=?", (sim_id,))
    return None if row is None else BriefState(row["origin"], row["source"], row["lines"], row["removed"],
                                               row["forgotten"])


def _gone(kind: str, source_id: int, sources: list[int], forgotten: Forgotten) -> bool:
    if kind == "belief" and source_id in forgotten.beliefs:
        return True
    return any(s in forgotten.messages for s in sources)


async def touched_by(db: Database, forgotten: Forgotten) -> dict[str, list[tuple[str, int]]]:
    """sim id -> the lines (kind, memory id) of its brief resting on what was forgotten (briefs of
    simulations of its scope only)."""
    rows = await db.fetchall(
        "SELECT l.sim_id, l.kind, l.source_id, l.sources FROM sim_brief_lines l"
        " JOIN simulations s ON s.id = l.sim_id WHERE s.scope=?", (forgotten.scope,))
    out: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        if _gone(r["kind"], r["source_id"], json.loads(r["sources"]), forgotten):
            out.setdefault(r["sim_id"], []).append((r["kind"], r["source_id"]))
    return out


async def drop_lines(db: Database, sim_id: str, lines: list[tuple[str, int]], read: bool) -> None:
    """Remove these lines (kind, memory id) of the brief; ``read``: a run had already read them
    (counted as forgotten after the run), else counted as removed before one."""
    column = "forgotten" if read else "removed"
    async with db.transaction() as conn:
        for kind, source_id in lines:
            await conn.execute("DELETE FROM sim_brief_lines WHERE sim_id=? AND kind=? AND source_id=?",
                               (sim_id, kind, source_id))
        await conn.execute(f"UPDATE sim_briefs SET {column} = {column} + ? WHERE sim_id=?", (len(lines), sim_id))
