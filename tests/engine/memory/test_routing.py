"""Routing and lifecycle semantics of the memory engine, with the real embedder."""
from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest

from engine.config import E5_MODEL, MINILM_MODEL, MemorySection
from engine.memory import beliefs as belief_store, router
from engine.memory.beliefs import NewBelief
from engine.memory.models import from_blob, iso, utcnow
from engine.memory.scope_cache import SPEAKERS_KEPT, ScopeState, load_channel
from tests.helpers.memory import Chat, close_engine, open_engine
from tests.helpers.wait import until

PANDAS = "how do I read a csv file with pandas"
PANDAS_2 = "pandas read_csv takes a sep argument for the csv delimiter"
BREAD = "my sourdough bread did not rise in the oven"


def test_threshold_rises_with_maturity_and_alpha_shrinks():
    cfg = MemorySection(base_threshold=0.3, maturity_gain=0.1, alpha_damping=0.7)
    assert router.threshold(cfg, 0.0) == pytest.approx(0.3)
    assert router.threshold(cfg, 1.0) == pytest.approx(0.4)
    assert router.alpha(cfg, 1, 0.0) == pytest.approx(0.5)
    assert router.alpha(cfg, 3, 1.0) == pytest.approx(0.25 * 0.3)
    assert router.is_short(cfg, "ok") and router.is_short(cfg, "what about tomorrow?")
    assert not router.is_short(cfg, PANDAS)


def test_centred_similarity_is_the_cosine_of_what_is_left_once_the_basis_is_projected_out():
    rng = np.random.default_rng(0)
    a, b, centre = (router.normalise(rng.normal(size=384)) for _ in range(3))
    fixed = router.fixed_directions(E5_MODEL, 10)
    assert fixed is not None and fixed.shape == (11, 384)   # the mean of chat, then 10 principal directions
    basis = router.projection_basis(fixed, centre)
    assert basis.shape == (12, 384) and np.allclose(basis @ basis.T, np.eye(12), atol=1e-5)
    left_a, left_b = a - basis.T @ (basis @ a), b - basis.T @ (basis @ b)
    expected = float(left_a @ left_b) / float(np.linalg.norm(left_a) * np.linalg.norm(left_b))
    assert router.centred(a, b, basis) == pytest.approx(expected, abs=1e-5)
    assert router.centred(a, b, None) == pytest.approx(float(a @ b))
    many = np.stack([a, b, centre])
    assert router.centred_many(a, many, basis) == pytest.approx([router.centred(a, v, basis) for v in many], abs=1e-5)
    assert router.centred(a, b, router.projection_basis(None, centre)) == pytest.approx(
        (float(a @ b) - float(a @ centre) * float(b @ centre))
        / np.sqrt((1 - float(a @ centre) ** 2) * (1 - float(b @ centre) ** 2)), abs=1e-5)   # the mean alone
    assert router.fixed_directions(E5_MODEL, 0) is None and router.fixed_directions(MINILM_MODEL, 10) is None



def test_the_speakers_direction_is_taken_out_in_the_share_n_over_n_plus_prior():
    rng = np.random.default_rng(1)
    a, b, centre, mine = (router.normalise(rng.normal(size=384)) for _ in range(4))
    basis = router.projection_basis(router.fixed_directions(E5_MODEL, 10), centre)
    assert router.with_speaker(basis, None, 10.0) == (basis, None)               # a newcomer: as before
    assert router.with_speaker(basis, (mine * 3, 3), 0.0) == (basis, None)       # off
    extended, weights = router.with_speaker(basis, (mine * 10, 10), 10.0)
    assert extended.shape == (13, 384) and np.allclose(extended @ extended.T, np.eye(13), atol=1e-5)
    assert weights[:12] == pytest.approx(np.ones(12)) and weights[12] == pytest.approx(0.75)   # half out: 2s - s^2
    # Taking out half of the speaker's component: the cosine of what is left of a and b.
    u = extended[12]
    left_a, left_b = (v - basis.T @ (basis @ v) for v in (a, b))
    left_a, left_b = left_a - 0.5 * (left_a @ u) * u, left_b - 0.5 * (left_b @ u) * u
    expected = float(left_a @ left_b) / float(np.linalg.norm(left_a) * np.linalg.norm(left_b))
    assert router.centred_many(a, b[None, :], extended, weights)[0] == pytest.approx(expected, abs=1e-5)
    # Weight 1 everywhere is the full projection.
    assert router.centred_many(a, b[None, :], extended, np.ones(13))[0] == pytest.approx(
        router.centred(a, b, extended), abs=1e-5)

def test_a_scope_keeps_the_means_of_the_speakers_who_spoke_last():
    state = ScopeState({}, {}, lambda: None, centre_sum=np.zeros(4))
    vec = np.ones(4, dtype=np.float32)
    for n in range(SPEAKERS_KEPT + 1):
        state.count_speaker(f"member {n}", vec)
    state.count_speaker("member 1", vec)    # speaks again: now the last to have spoken
    state.count_speaker("newcomer", vec)
    assert len(state.speakers) == SPEAKERS_KEPT
    assert state.speaker("member 0") is None and state.speaker("member 2") is None   # the longest silent went
    total, n = state.speaker("member 1")
    assert n == 2 and total == pytest.approx(2 * vec)


def test_short_counts_the_words_of_the_messages_own_language():
    cfg = MemorySection(short_max_content_words=2)
    # Portuguese greetings and stop words say nothing about a topic
    assert router.is_short(cfg, "oi pessoal, alguém vai?")
    assert not router.is_short(cfg, "o cano da garagem estourou de novo e alagou tudo")
    # written without spaces: cut into words before they are counted, not one word per clause
    assert not router.is_short(cfg, "サッカーの試合を見ましたか")
    assert not router.is_short(cfg, "วันนี้ฝนตกหนักมาก น้ำท่วมถนน")
    assert router.is_short(cfg, "ครับ")


async def test_birth_absorb_moves_centroid_by_alpha(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.3, context_weight=0.0)
    chat = Chat()
    first = await engine.ingest(chat.msg(PANDAS))
    assert first.action == "birth"
    second = await engine.ingest(chat.msg(PANDAS_2))
    assert second.action == "absorb" and second.world_id == first.world_id
    third = await engine.ingest(chat.msg(BREAD))
    assert third.action == "birth" and third.world_id != first.world_id

    v1, v2 = engine.embedder.encode([PANDAS, PANDAS_2])
    expected = router.absorb(v1, v2, 1 / (1 + 1))  # access_count 1, maturity 0
    stored = from_blob(await db.fetchval("SELECT centroid FROM worlds WHERE id=?", (first.world_id,)))
    assert np.allclose(stored, expected, atol=1e-4)
    info = {w.id: w for w in await engine.worlds(chat.scope)}
    assert info[first.world_id].access_count == 2 and info[first.world_id].evidence == 2
    assert len(info) == 2
    await close_engine(db, engine)


async def test_mature_world_needs_more_similarity(tmp_path):
    cfg_probe = [PANDAS, "I am learning to bake cakes with chocolate"]
    db, engine = await open_engine(tmp_path / "probe.db")
    v_a, v_b = engine.embedder.encode(cfg_probe)
    await close_engine(db, engine)
    sim = float(v_a @ v_b)
    base = sim - 0.05  # an immature world (threshold = base) accepts; a mature one (base + 0.10) refuses
    for mature, expected in ((False, "absorb"), (True, "birth")):
        db, engine = await open_engine(tmp_path / f"m{mature}.db", base_threshold=base, context_weight=0.0,
                                       short_max_content_words=0)
        chat = Chat()
        born = await engine.ingest(chat.msg(PANDAS))
        if mature:
            facts = [NewBelief("pandas", f"fact {i}", "csv", 1.0, False, [1], chat.msg("x").ts) for i in range(10)]
            async with db.transaction() as conn:
                await belief_store.apply(conn, chat.scope, born.world_id, facts,
                                         engine.embedder.encode([f.text() for f in facts]), utcnow())
            await close_engine(db, engine)
            db, engine = await open_engine(tmp_path / f"m{mature}.db", base_threshold=base, context_weight=0.0,
                                           short_max_content_words=0)
            assert (await engine.worlds(chat.scope))[0].maturity == pytest.approx(1.0)
        result = await engine.ingest(chat.msg(cfg_probe[1]))
        assert result.action == expected, (mature, result)
        await close_engine(db, engine)


async def test_short_message_follows_the_channel(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.5, context_weight=0.0)
    chat = Chat()
    lone = await engine.ingest(chat.msg("ok", channel="empty"))
    assert lone.action == "birth"  # nothing to follow in a fresh channel
    topic = await engine.ingest(chat.msg(BREAD))
    follow = await engine.ingest(chat.msg("what about tomorrow?"))
    assert follow.world_id == topic.world_id and follow.action in ("follow", "absorb")
    # The same short line, long after the conversation went quiet, does not follow.
    chat.step_s = 3 * 3600
    late = await engine.ingest(chat.msg("haha really"))
    assert late.action == "birth" and late.world_id != topic.world_id
    await close_engine(db, engine)


async def test_merge_moves_everything_and_is_recorded(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.99, merge_threshold=0.6,
                                   context_weight=0.0)
    chat = Chat()
    a = await engine.ingest(chat.msg(PANDAS))
    b = await engine.ingest(chat.msg("reading a csv file into a pandas dataframe"))
    c = await engine.ingest(chat.msg(BREAD))
    assert len({a.world_id, b.world_id, c.world_id}) == 3
    shared = NewBelief("pandas", "reads", "csv files", 0.5, False, [1], chat.msg("x").ts)
    async with db.transaction() as conn:
        for wid in (a.world_id, b.world_id):
            await belief_store.apply(conn, chat.scope, wid, [shared], engine.embedder.encode([shared.text()]),
                                     utcnow())
    merged = await engine.merge(chat.scope)
    assert len(merged) == 1 and {merged[0]["kept"], merged[0]["absorbed"]} == {a.world_id, b.world_id}
    kept = merged[0]["kept"]
    worlds = {w.id: w for w in await engine.worlds(chat.scope)}
    assert set(worlds) == {kept, c.world_id}
    assert worlds[kept].evidence == 2 and worlds[kept].access_count == 2
    rows = await db.fetchall("SELECT confidence, sources FROM beliefs WHERE world_id=?", (kept,))
    assert len(rows) == 1 and rows[0]["confidence"] == pytest.approx(0.75) and json.loads(rows[0]["sources"]) == [1]
    log = await db.fetchall("SELECT kept_id, absorbed_id FROM world_merges WHERE scope=?", (chat.scope,))
    assert [(r["kept_id"], r["absorbed_id"]) for r in log] == [(merged[0]["kept"], merged[0]["absorbed"])]
    # The index forgot the absorbed world: a query lands on the kept one.
    world, _ = await engine.route_query(chat.scope, "pandas csv")
    assert world.id == kept
    assert len(engine.cache.scopes[chat.scope].index("")) == 2
    # The channel's state in memory is what a restart reads: its recent messages, routing's
    # context, name the kept world too.
    channel = engine.cache.channels[(chat.scope, chat.channel)]
    fresh = await load_channel(db, engine.cfg, chat.scope, chat.channel)
    assert [w for *_, w in channel.recent] == [w for *_, w in fresh.recent] == [kept, kept, c.world_id]
    digest = await engine.digest(chat.scope, utcnow() - timedelta(minutes=5))
    assert [(m.kept_id, m.absorbed_id) for m in digest.merges] == [(kept, merged[0]["absorbed"])]
    await close_engine(db, engine)


async def test_decay_halves_confidence_per_half_life(db_url):
    db, engine = await open_engine(db_url, half_life_days=10)
    chat = Chat()
    r = await engine.ingest(chat.msg(PANDAS))
    fact = NewBelief("pandas", "reads", "csv", 0.8, False, [1], chat.msg("x").ts)
    async with db.transaction() as conn:
        await belief_store.apply(conn, chat.scope, r.world_id, [fact], engine.embedder.encode([fact.text()]),
                                 utcnow())
    await db.execute("UPDATE beliefs SET decayed_at=?", (iso(utcnow() - timedelta(days=20)),))
    result = await engine.maintain(chat.scope)
    assert result["decayed"] == 1
    assert await db.fetchval("SELECT confidence FROM beliefs") == pytest.approx(0.2, abs=1e-3)
    await close_engine(db, engine)


async def test_dead_worlds_are_removed_at_start(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.99)
    chat = Chat()
    keep = await engine.ingest(chat.msg(PANDAS))
    dead = await engine.ingest(chat.msg(BREAD))
    await db.execute("DELETE FROM memory_messages WHERE world_id=?", (dead.world_id,))
    await close_engine(db, engine)
    db, engine = await open_engine(db_url, base_threshold=0.99)
    assert [w.id for w in await engine.worlds(chat.scope)] == [keep.world_id]
    assert len(engine.cache.scopes[chat.scope].index("")) == 1
    await close_engine(db, engine)


async def test_topics_are_renamed_in_the_background_as_worlds_grow(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.1, topic_delay_s=0)
    chat = Chat()
    for text in (PANDAS, PANDAS_2, "pandas groupby on a big csv is slow"):
        await engine.ingest(chat.msg(text))
    # named since it was born (before, its first line's words), then read: a loaded machine names late
    await until(lambda: db.fetchval("SELECT topic_size FROM worlds"), 20, "the world named")
    worlds = await engine.worlds(chat.scope)
    assert set(worlds[0].topic.lower().split()[:2]) == {"pandas", "csv"}, worlds[0].topic
    await close_engine(db, engine)
