"""The graph store keeps a bounded number of graphs loaded, and reads them off the event loop."""
from __future__ import annotations

import json

import numpy as np
import pytest

from engine.sim.graph.store import GraphStore
from engine.sim.graph.vectors import to_blob
from tests.helpers.llm_fixtures import embedder, sqlite_only  # noqa: F401
from tests.helpers.loop_lag import watch_loop
from tests.helpers.simdata import write_graph

pytestmark = pytest.mark.timeout(300)


async def test_cache_keeps_the_most_recently_read_graphs_within_its_bound(db, embedder, tmp_path):
    for sim in ("a", "b", "c", "d"):
        await write_graph(db, sim, tmp_path / sim, embedder)
    store = GraphStore(db, embedder, cache_size=2)
    for sim in ("a", "b", "a", "c"):
        assert (await store.summary(sim))["entities"] == 4
        assert len(store.cached) <= 2
    assert store.cached == ["a", "c"]  # b was read least recently
    hits = await store.search("d", "who opposes the fare hike?", k=3)
    assert hits and "Commuters Union opposes" in hits[0].text
    assert store.cached == ["c", "d"]
    assert [f.fact for f in await store.neighbours("b", "Mayor Jansen")] == ["Mayor Jansen chairs the City Council."]
    assert store.cached == ["d", "b"]


async def big_graph(db, sim_id: str, entities: int, facts: int) -> None:
    """A large graph written straight into the tables, with random unit vectors."""
    rng = np.random.default_rng(0)

    def unit(n):
        v = rng.standard_normal((n, 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    await db.execute("INSERT INTO simulations (id, scope, requirement, folder, created_at)"
                     " VALUES (?, 'console:local', 'r', '/nowhere', '2026-01-01')", (sim_id,))
    vecs = unit(entities)
    await db.executemany(
        "INSERT INTO sim_entities(id, sim_id, name, norm_name, type, summary, attributes, aliases, mentions, embedding)"
        " VALUES (?,?,?,?,?,?,?,?,?,?)",
        [(i + 1, sim_id, f"Person {i}", f"person {i}", "Person", f"Person {i} commutes by bus number {i % 97}.",
          json.dumps({}), json.dumps([]), 1, to_blob(vecs[i])) for i in range(entities)])
    vecs = unit(facts)
    await db.executemany(
        "INSERT INTO sim_edges(sim_id, source_id, target_id, relation, fact, embedding) VALUES (?,?,?,?,?,?)",
        [(sim_id, 1 + i % entities, 1 + (i * 7 + 1) % entities, "KNOWS",
          f"Person {i % entities} argued with Person {(i * 7 + 1) % entities} about fare {i}.", to_blob(vecs[i]))
         for i in range(facts)])


@sqlite_only
async def test_searches_of_a_large_graph_leave_the_event_loop_responsive(db, embedder):
    await big_graph(db, "big", 4000, 30000)
    store = GraphStore(db, embedder)
    await embedder.embed(["warm up"])
    async with watch_loop() as lag:
        hits = await store.search("big", "Person 12 argued about fares", k=5)
        chain = await store.chain("big", "Person 1", "Person 8")
        summary = await store.summary("big")
    assert len(hits) == 5 and summary["entities"] == 4000 and summary["facts"] == 30000
    assert chain and chain[0].source == "Person 1"
    # On the loop, loading, scoring and the chain's graph held it for over a second at a time.
    assert lag.worst < 0.3, f"the event loop stalled for {lag.worst * 1000:.0f} ms"
