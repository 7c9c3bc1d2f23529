"""The keyword side of recall in each database's SQL: FTS5 bm25 on SQLite, the generated
``search_tsv`` column (migrations/postgresql/0015) and ts_rank on PostgreSQL.

Both read the expression ``textutil.fts_query`` writes: quoted terms and phrases joined by OR,
which is an FTS5 MATCH expression and a ``websearch_to_tsquery`` expression alike, so a question
is parsed once for either database. PostgreSQL stems it with the 'english' configuration its
columns are indexed with (FTS5 uses porter: "trains" finds "training" on both).

Scores are higher-is-better and compared only within one query (retrieval.fused divides by the
query's best), so bm25 and ts_rank need not share a scale. They do not rank alike: ts_rank counts
matching terms and (normalisation 1) divides by the log of the document's length, but it has no
inverse document frequency, so a term every message holds (a speaker's name in a two-person
chat) weighs as much as a rare one.

Privacy: every statement filters by the viewer (``viewer.where``) like the rest of recall.
"""
from __future__ import annotations

from engine.db import Database
from engine.memory.audience import Viewer

POOL_FACTOR = 8            # SQLite: full-text matches ranked before the scope filter, per candidate


async def keyword_messages(db: Database, viewer: Viewer, match: str | None, n: int) -> list[tuple[int, float]]:
    """(message id, score: higher is better) of the scope the viewer sees for the expression
    ``match``, best first, at most ``n``.

    SQLite's full-text index spans every scope, and joining each match to its (large) message row
    is what costs: at 100k messages a common word matches thousands. So the best ``POOL_FACTOR x n``
    matches are ranked first and only those joined; when fewer than ``n`` of them belong to the
    viewer, every match is joined. On PostgreSQL the tsvector is a column of the message row, and
    the planner picks the GIN index or the scope's rows."""
    if not match:
        return []
    sees, seen = viewer.where("w.audience")
    if db.dialect == "postgresql":
        rows = await db.fetchall(
            "SELECT m.id, ts_rank(m.search_tsv, q, 1) AS s FROM websearch_to_tsquery('english', ?) q "
            "JOIN memory_messages m ON m.search_tsv @@ q JOIN worlds w ON w.id = m.world_id "
            f"WHERE m.scope=? AND {sees} ORDER BY s DESC, m.id LIMIT ?", (match, viewer.scope, *seen, n))
        return [(r["id"], r["s"]) for r in rows]
    rows: list = []
    for pool in (n * POOL_FACTOR, -1):   # LIMIT -1: no limit
        rows = await db.fetchall(
            "SELECT m.id, f.s FROM (SELECT rowid, -bm25(memory_messages_fts) AS s FROM memory_messages_fts "
            "WHERE memory_messages_fts MATCH ? ORDER BY s DESC LIMIT ?) f "
            "CROSS JOIN memory_messages m ON m.id = f.rowid CROSS JOIN worlds w ON w.id = m.world_id "
            f"WHERE +m.scope=? AND {sees} ORDER BY f.s DESC LIMIT ?", (match, pool, viewer.scope, *seen, n))
        if len(rows) >= n:
            break
    return [(r["id"], r["s"]) for r in rows]


async def keyword_beliefs(db: Database, viewer: Viewer, match: str | None, n: int) -> list[tuple[int, float]]:
    """(belief id, score: higher is better) of the active beliefs the viewer sees, best first."""
    if not match:
        return []
    sees, seen = viewer.where("w.audience")
    if db.dialect == "postgresql":
        sql = ("SELECT b.id, ts_rank(b.search_tsv, q, 1) AS s FROM websearch_to_tsquery('english', ?) q "
               "JOIN beliefs b ON b.search_tsv @@ q JOIN worlds w ON w.id = b.world_id "
               f"WHERE b.scope=? AND b.invalid_at IS NULL AND {sees} ORDER BY s DESC, b.id LIMIT ?")
    else:
        sql = ("SELECT b.id, -bm25(beliefs_fts) AS s FROM beliefs_fts JOIN beliefs b ON b.id = beliefs_fts.rowid "
               "JOIN worlds w ON w.id = b.world_id "
               f"WHERE beliefs_fts MATCH ? AND b.scope=? AND b.invalid_at IS NULL AND {sees} ORDER BY s DESC LIMIT ?")
    rows = await db.fetchall(sql, (match, viewer.scope, *seen, n))
    return [(r["id"], r["s"]) for r in rows]
