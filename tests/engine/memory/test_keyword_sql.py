"""The keyword search of one scope: the scope is part of the full-text query, so another
server's size does not change what a small server's search reads; each scope's search statistics
follow every write; and SQLite and PostgreSQL, indexing the same tokens, rank the same rows with
the same BM25 scores, over the scope's own statistics, whatever other servers the database holds."""
from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest

from engine.db import open_database
from engine.memory import MemoryMessage
from engine.memory.audience import Viewer
from engine.memory.keyword_sql import (
    OWN_STATS_MAX_ROWS,
    _pg_bm25,
    _pg_params,
    fts5_match,
    keyword_messages,
    messages_match,
    scope_stats,
    terms_rows,
)
from engine.memory.textutil import Query, fts_query
from tests.helpers.memory import close_engine, open_engine
from tests.helpers.search import MONDAY, seed_scope, vm_steps

pytestmark = pytest.mark.timeout(180)


async def _work(db, viewer: Viewer, query: Query) -> int:
    """What keyword_messages costs for ``viewer``: SQLite virtual-machine steps, or on PostgreSQL
    the most rows any step of the executed plan read from the messages' table or its index."""
    if db.dialect == "sqlite":
        return await vm_steps(db, keyword_messages(db, viewer, query, 50))
    sees, seen = viewer.where("w.audience")
    plan = await db.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + _pg_bm25("memory_messages", "m", "", sees),
                             (*_pg_params("memory_messages", viewer.scope, query), *seen, 50))
    nodes, most = [json.loads(plan)[0]["Plan"]], 0
    while nodes:
        node = nodes.pop()
        if node.get("Relation Name") == "memory_messages" or node.get("Index Name") == "memory_messages_search":
            most = max(most, node["Actual Rows"])
        nodes += node.get("Plans", [])
    return most


async def test_keyword_search_reads_only_the_viewer_s_scope(db):
    small = Viewer.operator("small:1")
    query = Query((("zebra",),))
    mine = await seed_scope(db, "small:1", "ws", 3, 1)
    alone = await _work(db, small, query)
    await seed_scope(db, "big:1", "wb", 3000, 100)    # another server: a thousand times more matches
    beside = await _work(db, small, query)
    assert sorted(i for i, _ in await keyword_messages(db, small, query, 50)) == mine
    if db.dialect == "postgresql":
        assert alone == beside == 3                  # the GIN index intersects the scope's entries
    else:
        # FTS5 reads a few more index pages; scoring and joining the other scope's 3,000 matches,
        # as before, took 135k steps here (2.7k now, 0.76k alone)
        assert beside < 5 * alone
    big = await keyword_messages(db, Viewer.operator("big:1"), query, 5000)
    assert len(big) == 3000 and not {i for i, _ in big} & set(mine)


async def test_a_scope_larger_than_its_matches_is_searched_without_its_token_with_the_same_scores(tmp_path):
    db = await open_database(tmp_path / "bot.sqlite3")
    try:
        big = await seed_scope(db, "big:1", "wb", 2000, 1)
        await seed_scope(db, "small:1", "ws", 3, 5000)
        rare, common = Query((("17",), ("170",))), Query((("zebra",),))
        assert "scope_key" not in messages_match("big:1", rare, 2000, await terms_rows(db, rare))   # 2 rows of 2,000
        assert "scope_key" in messages_match("small:1", common, 3, await terms_rows(db, common))   # 2,003 rows
        assert "scope_key" in messages_match("big:1", common, 2000, await terms_rows(db, common))
        found = await keyword_messages(db, Viewer.operator("big:1"), rare, 50)
        scoped = await db.fetchall("SELECT rowid AS id, -bm25(memory_messages_fts, 0.0, 1.0) AS s FROM "
                                   "memory_messages_fts WHERE memory_messages_fts MATCH ? ORDER BY s DESC",
                                   (fts5_match("big:1", rare),))
        assert [i for i, _ in found] == [r["id"] for r in scoped] == [big[17], big[170]]
        assert [s for _, s in found] == pytest.approx([r["s"] for r in scoped], rel=1e-12)
        other = await keyword_messages(db, Viewer.operator("small:1"), rare, 50)
        assert other == []   # the other scope's matches are filtered out on the message rows
    finally:
        await db.close()


async def test_a_question_that_may_match_too_many_rows_is_ranked_by_fts5_s_counts(tmp_path):
    """Counting is bounded: a minority scope is ranked by its own counts unless the question may
    match more than OWN_STATS_MAX_ROWS of its rows; then by FTS5's, which include the other scope."""
    db = await open_database(tmp_path / "bot.sqlite3")
    try:
        size = OWN_STATS_MAX_ROWS + 1000
        mine = await seed_scope(db, "a:1", "wa", size, 1)                   # 'zebra stripe i' each
        await seed_scope(db, "b:1", "wb", size + 1000, 100_000)
        await db.execute("UPDATE memory_messages SET search_terms = replace(search_terms, 'zebra stripe', "
                         "'lion mane') WHERE scope = 'b:1'")
        viewer = Viewer.operator("a:1")
        rare = await keyword_messages(db, viewer, Query((("17",), ("170",))), 5)   # 2 rows of this scope
        # own counts: N and n the scope's, every row 4 tokens long, so the score is the idf alone
        assert [i for i, _ in rare] == [mine[17], mine[170]]
        assert [s for _, s in rare] == pytest.approx([math.log((size - 1 + 0.5) / 1.5)] * 2, rel=1e-9)
        # every row of the scope, none of the other's: in FTS5's counts zebra is in fewer than half of
        # the rows (idf 0.15); in the scope's own, in all of them (idf 1e-6)
        common = Query((("zebra",), ("stripe",)))
        found = await keyword_messages(db, viewer, common, 5)
        assert min(s for _, s in found) > 0.1
        fts5 = await db.fetchall("SELECT rowid AS id, -bm25(memory_messages_fts, 0.0, 1.0) AS s FROM "
                                 "memory_messages_fts WHERE memory_messages_fts MATCH ? ORDER BY s DESC, rowid "
                                 "LIMIT 5", (fts5_match("a:1", common),))
        assert sorted(s for _, s in found) == pytest.approx(sorted(r["s"] for r in fts5), rel=1e-12)
    finally:
        await db.close()


async def test_each_scope_s_search_statistics_follow_every_write(db):
    """Rows and tokens per scope, the scope's token counted in each row, as FTS5 counts them."""
    async def stats(scope: str) -> tuple[int, int]:
        docs, tokens, _ = await scope_stats(db, "memory_messages", scope)
        return docs, tokens
    mine = await seed_scope(db, "small:1", "ws", 3, 1)      # 'zebra stripe i': 3 tokens and the scope's
    await seed_scope(db, "big:1", "wb", 5, 100)
    assert await stats("small:1") == (3, 12) and await stats("big:1") == (5, 20)
    assert await scope_stats(db, "memory_messages", "big:1") == (5, 20, 8)
    await db.execute("UPDATE memory_messages SET search_terms = 'zebra' WHERE id = ?", (mine[0],))
    await db.execute("UPDATE memory_messages SET search_terms = '' WHERE id = ?", (mine[1],))
    assert await stats("small:1") == (3, 2 + 1 + 4)
    await db.execute("UPDATE memory_messages SET scope = 'big:1' WHERE id = ?", (mine[2],))
    assert await stats("small:1") == (2, 3) and await stats("big:1") == (6, 24)
    await db.execute("DELETE FROM worlds WHERE id = 'ws'")               # cascades to its messages
    assert await stats("small:1") == (0, 0) and await stats("big:1") == (5, 20)
    assert await stats("nobody:1") == (0, 0)


async def test_a_small_scope_ranked_by_its_own_statistics_shows_only_what_the_viewer_reads(db):
    """A private world's rows count for how common a word is in the scope, and are never shown to
    a viewer outside its audience."""
    await seed_scope(db, "big:1", "wb", 40, 1000)     # most of the table: "small:1" counts its own
    mine = await seed_scope(db, "small:1", "ws", 3, 1)
    secret = await seed_scope(db, "small:1", "wp", 3, 10)
    await db.execute("UPDATE worlds SET audience = 'role:staff' WHERE id = 'wp'")
    # stored, not yet embedded and routed: read under the audience on its own row
    await db.execute("INSERT INTO memory_messages(id, scope, channel, message_id, author, text, search_terms, ts, "
                     "audience) VALUES (20, 'small:1', 'staff', 'm20', 'anna', 'x', 'zebra stripe 20', 'n', "
                     "'role:staff')")
    secret.append(20)
    query = Query((("zebra",), ("stripe",)))
    public = await keyword_messages(db, Viewer("small:1"), query, 50)
    staff = await keyword_messages(db, Viewer("small:1", "role:staff"), query, 50)
    assert sorted(i for i, _ in public) == mine
    assert sorted(i for i, _ in staff) == sorted(mine + secret)
    # the same scores for the rows both see: n and N are the scope's, whoever asks
    assert dict(public) == {i: s for i, s in staff if i in mine}
    assert await keyword_messages(db, Viewer("small:1"), Query((("ghost",),)), 50) == []


PARITY_CHAT = [
    ("Anna", "I bought a bike for the long summer rides"), ("Bob", "I bought a car"),
    ("Anna", "yesterday I ran a marathon in the rain"), ("Bob", "nice! how long did the marathon take?"),
    ("Anna", "four hours, my legs hurt, the rain never stopped"), ("Cy", "the weather is nice for a ride"),
    ("Bruno", "o jogo de ontem foi ótimo, o Flamengo marcou dois gols"),
    ("Ana", "os jogos do campeonato começam em maio"), ("Somchai", "เมื่อวานฉันไปดูฟุตบอลที่สนามกับเพื่อน"),
    ("Wei", "我昨天和朋友去看足球比赛"), ("Cy", "Anna, Bob: the marathon photos are online"),
]
# Another server in the same database, whose words are the first chat's: ranked with the whole
# table's statistics (FTS5's own), "anna" and "marathon" would weigh as common words here.
OTHER_CHAT = [(("Anna", "Bob", "Cy")[i % 3], f"Anna and Bob ran the marathon again, photos {i} online")
              for i in range(30)]
PARITY_QUESTIONS = ["What did Anna buy?", "Who ran a marathon on 7 May 2023?", "rain marathon legs",
                    "quem marcou gols nos jogos?", "ฟุตบอล", "足球比赛", "Anna Bob photos", "bike car ride"]


async def _ranked(url: str) -> list[list[tuple[str, float]]]:
    db, engine = await open_engine(url)
    try:
        for scope, chat in (("other:1", OTHER_CHAT), ("test:1", PARITY_CHAT)):
            await engine.ingest_many([MemoryMessage(scope, "general", str(i), author, text,
                                                    MONDAY + timedelta(minutes=i))
                                      for i, (author, text) in enumerate(chat)])
        ids = {r["id"]: r["message_id"] for r in await db.fetchall(
            "SELECT id, message_id FROM memory_messages WHERE scope = 'test:1'")}
        out = []
        for question in PARITY_QUESTIONS:
            hits = await keyword_messages(db, Viewer.operator("test:1"), fts_query(question, now=MONDAY), 5)
            out.append([(ids[i], s) for i, s in hits])
        return out
    finally:
        await close_engine(db, engine)


async def test_sqlite_and_postgresql_rank_the_same_rows_with_the_same_scores(pg_server, tmp_path):
    lite = await _ranked(f"sqlite:///{tmp_path / 'bot.sqlite3'}")
    pg = await _ranked(await pg_server.fresh_database())
    assert all(lite), "every question finds something"
    for question, a, b in zip(PARITY_QUESTIONS, lite, pg):
        assert [m for m, _ in a] == [m for m, _ in b], question
        assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9), question
