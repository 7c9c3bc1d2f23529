"""The keyword side of recall in each database's SQL: BM25 over the tokens the engine wrote
(``search_terms``, engine/memory/terms.py; migration 0026), within one scope.

Both databases index the same tokens with the same positions: FTS5 splits ``search_terms`` at
spaces (its ``ascii`` tokenizer), PostgreSQL builds a tsvector from them as they are. A
``textutil.Query`` (tokens and phrases of tokens, any of which may match) becomes an FTS5
MATCH expression or a tsquery here.

Scope inside the full-text query: each row is indexed with its scope as a token of its own
(FTS5: the ``scope_key`` column; PostgreSQL: the lexeme 'scope:<scope>'), and every query asks
for it AND any of the question's terms. The index then intersects the scope's entries with the
terms' instead of scoring every server's matches and filtering afterwards: at 300k messages of
other servers, a small server's keyword search costs what it costs alone (bench/RESULTS.md).

Ranking, the same on both: Okapi BM25 as FTS5's bm25() computes it (k1 = 1.2, b = 0.75,
idf = ln((N - n + 0.5) / (n + 0.5)), at least 1e-6; a phrase counts as one term, present or not),
higher is better, over the scope's own statistics: N its rows, n its rows holding the term, the
average length its rows' (memory_search_stats, kept by triggers on both databases, migrations
0026 and 0033). PostgreSQL computes the sum in SQL from the tsvector (a token's count is its
number of positions). FTS5 keeps its counts for the whole table, every server and chat together,
and a speaker's name in half of one chat's lines then weighs as a rare word: with ten LoCoMo
conversations in one database, evidence recall@5 was 0.589 against 0.614 with a database each
(bench/RESULTS.md). So on SQLite a scope that holds less than ``OWN_STATS_SHARE`` of its table's
rows has its matches counted and ranked here (``bm25``) with the scope's statistics, the same
scores PostgreSQL computes. A scope holding more is ranked by FTS5's own bm25() with the scope
column weighted 0, whose statistics are then mostly the scope's, and which need not bring each
match's tokens out of SQLite (at 100k messages a common word is in tens of thousands of rows).
So is a question that could match more than ``OWN_STATS_MAX_ROWS`` of the scope's rows: counting
costs about 13 us a match here (bench/RESULTS.md), and one member asking for common words must
not hold a recall for seconds; such a question is ranked by counts that include other scopes.
(ts_rank, used before BM25, has no inverse document frequency: a speaker's name in every line
weighed as much as a rare word, and it found fewer evidence turns than bm25 on the same data.)

When the scope is most of the database (SQLite): asking for the scope's token costs in proportion
to the scope's size, whatever the question: FTS5's bm25() counts every row holding each phrase of
the query to weigh it (its idf), the scope's token included, although its column weighs 0, and
intersects every match with it. At 100k messages of one scope that is most of a keyword search
(3 ms before any term is scored; twice the cost of a search over common words,
bench/RESULTS.md). So the rows the question's terms are in (FTS5's own counts, through an
``fts5vocab`` table of the connection) are compared with the scope's rows first: when the
terms are in no more rows than the scope holds, the query asks for the terms alone and the
scope is filtered on the message rows; the scores are the same (a row's bm25 does not depend on
the query's zero-weight phrase, nor on rows of other scopes when this module counts), and the
rows scored are at most as many as the scope's. A small scope beside large ones keeps its token
in the query.

Privacy: every statement filters by the viewer (``viewer.where``) like the rest of recall. A
message stored but not yet embedded and routed (engine.memory.pending) has no world: it is
found by its words all the same, filtered by the audience stored on its row
(audience.message_audience).
"""
from __future__ import annotations

import asyncio
import math
import weakref
from typing import Iterable, NamedTuple

from engine.db import Database
from engine.memory.audience import Viewer, message_audience
from engine.memory.beliefs import in_recall
from engine.memory.terms import MAX_POSITIONS
from engine.memory.textutil import Query

POOL_FACTOR = 8            # SQLite: scope matches ranked before the audience filter, per candidate
VOCAB = "temp.memory_messages_vocab"   # SQLite: FTS5's rows per token of memory_messages_fts (fts5vocab)
OWN_STATS_SHARE = 0.5      # SQLite: a scope with less of its table's rows is ranked by its own statistics
OWN_STATS_MAX_ROWS = 5000  # SQLite: ... unless a question may match more of its rows than this
_has_vocab: "weakref.WeakSet[Database]" = weakref.WeakSet()   # connections that have VOCAB
K1, B = 1.2, 0.75          # FTS5's bm25 constants


def scope_key(scope: str) -> str:
    """The token FTS5 indexes a row's scope under (migration 0026: 's' || hex(scope))."""
    return "s" + scope.encode("utf-8").hex().upper()


def fts5_match(scope: str | None, query: Query) -> str:
    """``query`` as an FTS5 MATCH expression, within ``scope`` (None: in every scope)."""
    anyof = " OR ".join('"' + " ".join(a) + '"' for a in query.alternatives)
    return f'scope_key : "{scope_key(scope)}" AND ({anyof})' if scope is not None else anyof


_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


async def fts5_rows(db: Database, tokens: list[str]) -> dict[str, int]:
    """token -> the rows of memory_messages_fts that hold it, all scopes together (FTS5's own
    count; absent: none). The connection's ``fts5vocab`` table is made on first use. Tokens are
    looked up as FTS5's ``ascii`` tokenizer stored them (ASCII letters folded to lower case)."""
    if db not in _has_vocab:
        await db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab(main, memory_messages_fts, row)")
        _has_vocab.add(db)
    folded = {t.translate(_ASCII_FOLD): t for t in tokens}
    rows = await db.fetchall(f"SELECT term, doc FROM {VOCAB} WHERE term IN ({','.join('?' * len(folded))})",
                             list(folded))
    return {folded[r["term"]]: r["doc"] for r in rows}


class ScopeStats(NamedTuple):
    """A scope's search statistics in one table (memory_search_stats, migrations 0026, 0033)."""
    docs: int        # the scope's rows
    tokens: int      # their tokens, each row's scope token included
    everyone: int    # the table's rows in every scope


async def scope_stats(db: Database, table: str, scope: str) -> ScopeStats:
    """``scope``'s statistics in ``table``."""
    row = await db.fetchone(
        "SELECT coalesce(sum(CASE WHEN scope = ? THEN docs END), 0) AS docs, "
        "coalesce(sum(CASE WHEN scope = ? THEN tokens END), 0) AS tokens, coalesce(sum(docs), 0) AS everyone "
        "FROM memory_search_stats WHERE tbl = ?", (scope, scope, table))
    return ScopeStats(int(row["docs"]), int(row["tokens"]), int(row["everyone"]))


async def terms_rows(db: Database, query: Query) -> int:
    """At least as many rows of memory_messages as hold any of ``query``'s alternatives, in every
    scope together (FTS5's counts; a phrase is in no more rows than its rarest token)."""
    counts = await fts5_rows(db, list(dict.fromkeys(t for a in query.alternatives for t in a)))
    return sum(min(counts.get(t, 0) for t in a) for a in query.alternatives)


def messages_match(scope: str, query: Query, scope_rows: int, in_terms: int) -> str:
    """The FTS5 expression for ``query`` in ``scope``'s messages (``scope_rows`` of them; the
    question's terms in at most ``in_terms`` rows of all scopes): with the scope's token unless the
    terms are in no more rows than the scope holds (module docstring)."""
    return fts5_match(None if in_terms <= scope_rows else scope, query)


def counted_here(stats: ScopeStats, matches_at_most: int) -> bool:
    """Whether SQLite ranks a scope with its own statistics (``bm25``) rather than FTS5's
    (module docstring), the question matching at most ``matches_at_most`` rows of the table."""
    return (stats.docs < OWN_STATS_SHARE * stats.everyone
            and min(stats.docs, matches_at_most) <= OWN_STATS_MAX_ROWS)


def bm25(rows: Iterable[tuple[int, str, bool]], query: Query, docs: int, tokens: int,
         n: int) -> list[tuple[int, float]]:
    """The best ``n`` of ``rows`` by Okapi BM25 over a scope's own statistics (module docstring),
    as (id, score), best first, ties by id. ``rows``: (id, search_terms, whether the viewer may
    see it) of every row of the scope holding any of ``query``'s alternatives: all of them count
    for each alternative's n, only the visible ones are ranked. ``docs``, ``tokens``: the scope's
    rows and their tokens (a row's length counts its scope's token, as FTS5 and PostgreSQL do).
    A token counts its occurrences (at most MAX_POSITIONS, as PostgreSQL keeps them), a phrase of
    several tokens 1 when it is there in order, as PostgreSQL counts it."""
    singles = {a[0]: i for i, a in enumerate(query.alternatives) if len(a) == 1}
    phrases = [(i, " " + " ".join(a) + " ") for i, a in enumerate(query.alternatives) if len(a) > 1]
    held: list[tuple[int, bool, int, dict[int, int]]] = []
    df = [0] * len(query.alternatives)
    for row_id, terms, visible in rows:
        words = terms.split()
        tf = {singles[w]: min(words.count(w), MAX_POSITIONS) for w in singles.keys() & words}
        if phrases:
            spaced = f" {' '.join(words)} "
            tf.update((i, 1) for i, phrase in phrases if phrase in spaced)
        for i in tf:
            df[i] += 1
        held.append((row_id, visible, 1 + len(words), tf))
    idf = [max(math.log((docs - d + 0.5) / (d + 0.5)), 1e-6) for d in df]
    avgdl = tokens / max(docs, 1)
    scored = [(row_id, sum(idf[i] * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avgdl))
                           for i, f in sorted(tf.items())))
              for row_id, visible, length, tf in held if visible]
    scored.sort(key=lambda r: (-r[1], r[0]))
    return scored[:n]


def _lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_items(query: Query) -> list[str]:
    """Each alternative of ``query`` as a tsquery of its own (a phrase: tokens in a row)."""
    return [" <-> ".join(_lexeme(t) for t in a) for a in query.alternatives]


def pg_tsquery(scope: str, query: Query) -> str:
    """``query`` as a tsquery, within ``scope``."""
    return f"{_lexeme('scope:' + scope)} & ({' | '.join(tsquery_items(query))})"


def _pg_bm25(table: str, alias: str, extra: str, sees: str, pending: bool = False) -> str:
    """PostgreSQL's BM25 over ``table``'s rows that match the whole query; parameters: each
    alternative's tsquery, its single token (NULL for a phrase), the whole query, the table's
    name and the scope for its statistics, then the viewer's, then the limit. ``pending``: rows
    without a world yet are kept, read under their own ``audience`` column (as ``m``)."""
    own = ", audience" if pending else ""
    outer = "LEFT " if pending else ""
    return (
        "WITH q AS (SELECT i, tq::tsquery AS tq, lx FROM unnest(?::text[], ?::text[]) "
        "WITH ORDINALITY AS t(tq, lx, i)), "
        f"hits AS MATERIALIZED (SELECT id, world_id{own}, search_tsv AS v, search_len AS len FROM {table} "
        "WHERE search_tsv @@ ?::tsquery), "
        f"f AS (SELECT h.id, h.world_id{own.replace(' ', ' h.')}, h.len, q.i, CASE WHEN q.lx IS NULL THEN 1 ELSE "
        "(SELECT array_length(u.positions, 1) FROM unnest(h.v) u WHERE u.lexeme = q.lx) END AS tf "
        "FROM hits h JOIN q ON h.v @@ q.tq), "
        "df AS (SELECT i, count(*) AS n FROM f GROUP BY i), "
        "st AS (SELECT docs::float8 AS docs, tokens::float8 / greatest(docs, 1) AS avgdl FROM memory_search_stats "
        "WHERE tbl = ? AND scope = ?) "
        f"SELECT f.id, sum(greatest(ln((st.docs - df.n + 0.5) / (df.n + 0.5)), 1e-6) * f.tf * {K1 + 1} "
        f"/ (f.tf + {K1} * ({1 - B} + {B} * f.len / st.avgdl))) AS s "
        f"FROM f JOIN df ON df.i = f.i CROSS JOIN st {f'JOIN {table} {alias} ON {alias}.id = f.id ' if extra else ''}"
        f"{outer}JOIN worlds w ON w.id = f.world_id WHERE {sees}{extra} GROUP BY f.id ORDER BY s DESC, f.id LIMIT ?")


def _pg_params(table: str, scope: str, query: Query) -> tuple:
    return (tsquery_items(query), [a[0] if len(a) == 1 else None for a in query.alternatives],
            pg_tsquery(scope, query), table, scope)


async def _own_stats_ranked(db: Database, sql: str, params: tuple, query: Query, stats: ScopeStats,
                            n: int) -> list[tuple[int, float]]:
    """``bm25`` over the rows ``sql`` returns (id, terms, ok: visible to the viewer), off the event
    loop: a scope's matches may be thousands of rows."""
    rows = [(r["id"], r["terms"], bool(r["ok"])) for r in await db.fetchall(sql, params)]
    return await asyncio.to_thread(bm25, rows, query, stats.docs, stats.tokens, n)


async def keyword_messages(db: Database, viewer: Viewer, query: Query | None, n: int) -> list[tuple[int, float]]:
    """(message id, score: higher is better) of the scope the viewer sees for ``query``, best
    first, at most ``n``.

    On SQLite the index spans every scope; the query asks for the viewer's unless the scope holds
    more rows than the question's terms are in (``messages_match``). A scope with less than
    ``OWN_STATS_SHARE`` of the table is ranked with its own statistics (``bm25``) when the question
    may match at most ``OWN_STATS_MAX_ROWS`` of its rows (``counted_here``). Otherwise FTS5
    ranks, and joining each match to its (large) message row is what costs, so the best
    ``POOL_FACTOR x n`` are joined first, and every match only when fewer than ``n`` of those are
    of the scope and in audiences the viewer reads."""
    if query is None:
        return []
    if db.dialect == "postgresql":
        sees, seen = viewer.where(message_audience("f"))
        ranked = await db.fetchall(_pg_bm25("memory_messages", "m", "", sees, pending=True),
                                   (*_pg_params("memory_messages", viewer.scope, query), *seen, n))
        return [(r["id"], r["s"]) for r in ranked]
    sees, seen = viewer.where(message_audience())
    stats = await scope_stats(db, "memory_messages", viewer.scope)
    in_terms = await terms_rows(db, query)
    match = messages_match(viewer.scope, query, stats.docs, in_terms)
    if counted_here(stats, in_terms):
        return await _own_stats_ranked(
            db, f"SELECT m.id, m.search_terms AS terms, ({sees}) AS ok FROM memory_messages_fts f "
            "CROSS JOIN memory_messages m ON m.id = f.rowid LEFT JOIN worlds w ON w.id = m.world_id "
            "WHERE memory_messages_fts MATCH ? AND +m.scope = ?", (*seen, match, viewer.scope), query, stats, n)
    rows: list = []
    for pool in (n * POOL_FACTOR, -1):   # LIMIT -1: no limit
        rows = await db.fetchall(
            "SELECT m.id, f.s FROM (SELECT rowid, -bm25(memory_messages_fts, 0.0, 1.0) AS s FROM memory_messages_fts "
            "WHERE memory_messages_fts MATCH ? ORDER BY s DESC LIMIT ?) f "
            "CROSS JOIN memory_messages m ON m.id = f.rowid LEFT JOIN worlds w ON w.id = m.world_id "
            f"WHERE +m.scope=? AND {sees} ORDER BY f.s DESC LIMIT ?", (match, pool, viewer.scope, *seen, n))
        if len(rows) >= n:
            break
    return [(r["id"], r["s"]) for r in rows]


async def keyword_beliefs(db: Database, viewer: Viewer, query: Query | None, n: int) -> list[tuple[int, float]]:
    """(belief id, score: higher is better) of the current beliefs (beliefs.in_recall) the viewer sees, best
    first; on SQLite ranked with the scope's own statistics as messages are (``counted_here``; any
    of the scope's beliefs may match)."""
    if query is None:
        return []
    sees, seen = viewer.where("w.audience")
    if db.dialect == "postgresql":
        rows = await db.fetchall(_pg_bm25("beliefs", "b", f" AND {in_recall('b.')}", sees),
                                 (*_pg_params("beliefs", viewer.scope, query), *seen, n))
        return [(r["id"], r["s"]) for r in rows]
    stats = await scope_stats(db, "beliefs", viewer.scope)
    if counted_here(stats, stats.docs):
        return await _own_stats_ranked(
            db, f"SELECT b.id, b.search_terms AS terms, ({in_recall('b.')} AND {sees}) AS ok FROM beliefs_fts "
            "JOIN beliefs b ON b.id = beliefs_fts.rowid JOIN worlds w ON w.id = b.world_id "
            "WHERE beliefs_fts MATCH ?", (*seen, fts5_match(viewer.scope, query)), query, stats, n)
    rows = await db.fetchall(
        "SELECT b.id, -bm25(beliefs_fts, 0.0, 1.0) AS s FROM beliefs_fts "
        "JOIN beliefs b ON b.id = beliefs_fts.rowid JOIN worlds w ON w.id = b.world_id "
        f"WHERE beliefs_fts MATCH ? AND b.scope=? AND {in_recall('b.')} AND {sees} ORDER BY s DESC LIMIT ?",
        (fts5_match(viewer.scope, query), viewer.scope, *seen, n))
    return [(r["id"], r["s"]) for r in rows]
