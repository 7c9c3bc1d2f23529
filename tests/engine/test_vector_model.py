"""The stored vectors' model (engine/vector_model.py): recorded by the first process that stores
any, a process with another model refused, and ``reembed`` refitting every vector (resuming when
interrupted) on both backends."""
from __future__ import annotations

import numpy as np
import pytest

from engine import vector_model
from engine.config import E5_MODEL, MINILM_MODEL, MemorySection, calibrated
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, beliefs as belief_store, records
from engine.memory.beliefs import NewBelief
from engine.memory.models import from_blob, utcnow
from engine.vector_model import VectorModelMismatch
from tests.helpers.memory import Chat, close_engine, open_engine

LINES = [("ana", "O atacante marcou dois gols no segundo tempo"),
         ("bia", "Tem um vazamento de água na garagem do prédio de novo"),
         ("carl", "The striker was brilliant, what a match"),
         ("dina", "The plumber comes tomorrow to fix the garage pipe"),
         ("ana", "Alguém viu o pênalti no fim do jogo?")]


async def _minilm_memory(db_url):
    """A scope remembered with MiniLM: messages in worlds, and a belief."""
    db, engine = await open_engine(db_url, model=MINILM_MODEL)
    chat = Chat()
    for author, text in LINES:
        await engine.ingest(chat.msg(text, author))
    world = (await engine.worlds(chat.scope))[0].id
    belief = NewBelief("ana", "watched", "the football match", 0.8, False, [1], chat.msg("x").ts)
    async with db.transaction() as conn:
        await belief_store.apply(conn, chat.scope, world, [belief], engine.embedder.encode([belief.text()]), utcnow())
    await close_engine(db, engine)
    return chat


async def test_reembed_refits_every_vector_and_resumes(db_url):
    chat = await _minilm_memory(db_url)
    with pytest.raises(VectorModelMismatch, match="memory reembed"):
        await open_engine(db_url, model=E5_MODEL)

    db = await open_database(db_url)
    e5 = Embedder(E5_MODEL)
    assert await vector_model.stored(db) == (MINILM_MODEL, 384)
    assert await vector_model.pending(db, E5_MODEL) == {"memory_messages": 5, "beliefs": 1, "sim_entities": 0,
                                                        "sim_edges": 0}

    class Interrupted(Exception):
        pass

    def stop_after_first_batch(table, rows):
        raise Interrupted

    with pytest.raises(Interrupted):
        await vector_model.reembed(db, e5, stop_after_first_batch, batch=2)
    assert (await vector_model.pending(db, E5_MODEL))["memory_messages"] == 3
    assert (await vector_model.stored(db))[0] == MINILM_MODEL   # not switched half-way
    done = await vector_model.reembed(db, e5, batch=2)
    assert done["memory_messages"] == 3 and done["beliefs"] == 1   # the 2 refitted before were kept

    rows = await db.fetchall("SELECT author, text, embedding, world_id FROM memory_messages ORDER BY id")
    stored = np.stack([from_blob(r["embedding"]) for r in rows])
    fresh = e5.encode([e5.turn(r["author"], r["text"]) for r in rows])
    assert np.allclose(stored, fresh, atol=1e-6)   # each text runs alone: its batch-mates change nothing
    belief = from_blob(await db.fetchval("SELECT embedding FROM beliefs"))
    assert np.allclose(belief, e5.encode(["ana watched the football match"])[0], atol=1e-6)
    for world in {r["world_id"] for r in rows}:
        members = stored[[r["world_id"] == world for r in rows]]
        mean = members.mean(axis=0)
        centroid = from_blob(await db.fetchval("SELECT centroid FROM worlds WHERE id=?", (world,)))
        assert float(centroid @ (mean / np.linalg.norm(mean))) > 0.999
    assert await vector_model.stored(db) == (E5_MODEL, 384)
    assert await db.fetchval("SELECT count(*) FROM vector_refit") == 0
    await db.close()

    # The refitted memory serves the multilingual model: an English question finds the Portuguese goal.
    db, engine = await open_engine(db_url, model=E5_MODEL)
    try:
        result = await engine.recall(chat.scope, "who scored two goals in the second half?", 1)
        assert result.evidence[0].text == LINES[0][1]
    finally:
        await close_engine(db, engine)
    with pytest.raises(VectorModelMismatch):   # and MiniLM is now the one refused
        await open_engine(db_url, model=MINILM_MODEL)


async def test_messages_stored_but_not_yet_embedded_get_the_new_models_vectors(db_url):
    """A bot stopped with messages stored and not yet embedded (engine.memory.pending): reembed
    refits the others and leaves them be; the next start embeds them with the new model."""
    chat = await _minilm_memory(db_url)
    db = await open_database(db_url)
    stored_only = MemoryEngine(db, Embedder(MINILM_MODEL), MemorySection(**calibrated(MINILM_MODEL)["memory"]))
    waiting = ["The ferry to Skopelos leaves at seven from pier four", "O síndico trocou o cano da garagem ontem"]
    assert await stored_only.store([chat.msg(text, "erin") for text in waiting]) == 2   # never started: no embedding
    assert await records.pending_count(db) == 2
    await stored_only.close()
    e5 = Embedder(E5_MODEL)
    assert (await vector_model.pending(db, E5_MODEL))["memory_messages"] == 5   # nothing to refit in those two
    done = await vector_model.reembed(db, e5)
    assert done["memory_messages"] == 5 and await records.pending_count(db) == 2
    await db.close()

    db, engine = await open_engine(db_url, model=E5_MODEL)
    try:
        await engine.embedded()
        assert await records.pending_count(db) == 0
        rows = await db.fetchall("SELECT author, text, embedding FROM memory_messages WHERE author='erin' ORDER BY id")
        assert np.allclose(np.stack([from_blob(r["embedding"]) for r in rows]),
                           e5.encode([e5.turn(r["author"], r["text"]) for r in rows]), atol=1e-6)
        result = await engine.recall(chat.scope, "when does the boat to the island go?", 1)
        assert result.evidence[0].text == waiting[0] and result.evidence[0].world_id   # routed, found by meaning
    finally:
        await close_engine(db, engine)


async def test_a_new_database_records_the_first_model(db_url):
    db, engine = await open_engine(db_url, model=E5_MODEL)
    await close_engine(db, engine)
    db = await open_database(db_url)
    try:
        assert await vector_model.stored(db) == (E5_MODEL, 384)
    finally:
        await db.close()
