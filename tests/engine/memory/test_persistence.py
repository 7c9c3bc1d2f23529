"""Memory survives a restart: worlds, counters, centroids, channel context and the index."""
from __future__ import annotations

import numpy as np

from engine.memory.models import MemoryMessage, from_blob
from tests.helpers.memory import T0, Chat, close_engine, open_engine

SETTINGS = dict(base_threshold=0.3, context_weight=0.0)


async def test_restart_keeps_worlds_index_and_channel(db_url):
    db, engine = await open_engine(db_url, **SETTINGS)
    chat = Chat()
    cooking = await engine.ingest(chat.msg("my sourdough bread did not rise in the oven"))
    await engine.ingest(chat.msg("the bread dough needs a warmer place to proof"))
    python = await engine.ingest(chat.msg("how do I read a csv file with pandas", channel="dev"))
    before = {w.id: (w.topic, w.access_count, w.evidence) for w in await engine.worlds(chat.scope)}
    centroids = {r["id"]: from_blob(r["centroid"]) for r in await db.fetchall("SELECT id, centroid FROM worlds")}
    await close_engine(db, engine)

    db, engine = await open_engine(db_url, **SETTINGS)
    after = {w.id: (w.topic, w.access_count, w.evidence) for w in await engine.worlds(chat.scope)}
    assert after == before and len(after) == 2
    index = engine.cache.scopes[chat.scope].index("")
    for wid, vec in centroids.items():
        assert np.allclose(index.vector(wid), vec, atol=1e-5)
    # The rebuilt index routes new messages to the old worlds.
    again = await engine.ingest(chat.msg("pandas dataframe from a csv file is slow to load", channel="dev"))
    assert again.world_id == python.world_id and again.action == "absorb"
    # The channel's current world came back from the database: a short reply follows it.
    follow = await engine.ingest(chat.msg("haha ok"))
    assert follow.world_id == cooking.world_id
    # A platform message already stored is not stored twice.
    dup = chat.msg("the bread dough needs a warmer place to proof")
    dup.message_id = f"{chat.scope}-2"
    assert await engine.ingest(dup) is None
    await close_engine(db, engine)


async def test_a_message_holding_nul_or_a_lone_surrogate_is_kept_and_found_on_either_backend(db_url):
    """PostgreSQL refuses NUL in text and neither database takes a lone surrogate: both become
    U+FFFD, in every field a platform or an import fills, rather than the message being lost."""
    db, engine = await open_engine(db_url, **SETTINGS)
    text = "the sourdough\x00starter lives in the fridge \ud800"
    message = MemoryMessage("test:1", "k\x00", "m\x00", "ann\x00", text, T0, author_id="7\x00")
    assert await engine.ingest(message) is not None
    (row,) = await db.fetchall("SELECT channel, message_id, author, author_id, text FROM memory_messages")
    assert dict(row) == {"channel": "k\ufffd", "message_id": "m\ufffd", "author": "ann\ufffd", "author_id": "7\ufffd",
                         "text": "the sourdough\ufffdstarter lives in the fridge \ufffd"}
    found = await engine.recall("test:1", "where does the starter live?")
    assert [e.message_id for e in found.evidence] == ["m\ufffd"]
    await close_engine(db, engine)
