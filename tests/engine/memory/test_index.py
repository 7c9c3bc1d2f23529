"""The centroid index against exact search: updates in place, deletions, compaction; and the
keyword topic names."""
from __future__ import annotations

import numpy as np

from engine.memory.index import CentroidIndex
from engine.memory.topics import keyword_topics


def unit(rng, n, dim=32):
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def exact(ids, vectors, q):
    sims = vectors @ q
    return ids[int(np.argmax(sims))], float(sims.max())


def test_index_follows_updates_and_deletions():
    rng = np.random.default_rng(7)
    index = CentroidIndex(32, capacity=8)  # grows past its first capacity
    live = {f"w{i}": v for i, v in enumerate(unit(rng, 300))}
    for wid, v in live.items():
        index.upsert(wid, v)
    for wid in list(live)[:50]:  # move some centroids
        live[wid] = unit(rng, 1)[0]
        index.upsert(wid, live[wid])
    for wid in list(live)[100:220]:  # delete enough to trigger compaction
        index.remove(wid)
        del live[wid]
    assert len(index) == len(live) == 180 and set(index.ids()) == set(live)
    ids = np.array(list(live))
    vectors = np.stack([live[w] for w in ids])
    hits = 0
    for q in unit(rng, 100):
        (best, sim), = index.search(q, 1)
        want, want_sim = exact(ids, vectors, q)
        hits += best == want
        assert best in live
        assert abs(sim - float(live[best] @ q)) < 1e-4
    assert hits >= 99
    for wid in list(live)[:5]:
        assert np.allclose(index.vector(wid), live[wid], atol=1e-5)
    stored = index.vectors(list(live)[:3])
    assert stored.dtype == np.float32 and stored.shape == (3, 32)
    assert index.search(unit(rng, 1)[0], 1000)[-1][0] in live  # k above the live count is clipped


def test_keyword_topics_name_what_sets_a_world_apart():
    docs = {
        "a": ["pandas dataframe csv", "pandas groupby on the dataframe", "read csv with pandas quickly"],
        "b": ["sourdough bread in the oven", "bread dough needs time", "the oven was too cold for bread"],
        "c": ["we talked about the weather", "the weather is nice quickly"],
    }
    names = keyword_topics(docs, {"a", "b"}, 2)
    assert set(names) == {"a", "b"}
    assert names["a"].split()[0] == "Pandas" and "bread" in names["b"].lower()
    assert "quickly" not in names["a"]  # frequent here but shared with another world
