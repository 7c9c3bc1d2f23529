"""Entity resolution: the vectorised merge makes the merges the pairwise rule made, and the
event loop stays responsive while thousands of names are resolved."""
from __future__ import annotations

import numpy as np
import pytest

from engine.sim.graph.entity_merge import merge_groups
from engine.sim.graph.step import ExtractedEntity, ExtractedRelation, Extraction, resolve
from engine.sim.ontology import normalise
from tests.helpers.entity_data import synthetic_extractions
from tests.helpers.llm_fixtures import minilm  # noqa: F401 (BEFORE and the 0.86 threshold are MiniLM's)
from tests.helpers.loop_lag import watch_loop

pytestmark = pytest.mark.timeout(300)
P, O = "Person", "Organization"  # noqa: E741 (one-letter tags keep the table of names readable)
CHUNKS = [
    [("Teresa Okafor", P), ("Okafor", P), ("Harbour Workers Union", O), ("City Council", O)],
    [("Dr. Teresa Okafor", P), ("the Harbour Workers' Union", O), ("James Brennan", P), ("Mayor James Brennan", P)],
    [("Brennan", P), ("Port Authority", O), ("The Port Authority", O), ("Amina Haddad", P), ("Haddad", P),
     ("Omar Haddad", P)],
    [("Harbour Workers Union", O), ("Harbour Workers' Union", O), ("Harbor Workers Union", O), ("Okafor's", P),
     ("Sofia Moreau", P), ("S. Moreau", P)],
    [("Moreau", P), ("Daily News", O), ("The Daily News", O), ("Riverside Daily News", O), ("Council", O),
     ("City Council of Riverside", O)],
    [("Lars Lindqvist", P), ("Lindqvist", O), ("Mei Takahashi", P), ("Takahashi", P), ("Mei Takahashi-Novak", P)],
]
# What the pairwise rule (a union-find over every pair) made of CHUNKS with MiniLM at 0.86:
# (main name, type, aliases, mentions) per entity, in order.
BEFORE = [
    ("Dr. Teresa Okafor", P, ["Okafor", "Okafor's", "Teresa Okafor"], 4),
    ("the Harbour Workers' Union", O, ["Harbor Workers Union", "Harbour Workers Union", "Harbour Workers' Union"], 5),
    ("City Council", O, ["Council"], 2),
    ("Mayor James Brennan", P, ["Brennan", "James Brennan"], 3),
    ("The Port Authority", O, ["Port Authority"], 2),
    ("Amina Haddad", P, [], 1),
    ("Haddad", P, [], 1),           # two full names end with it: it stays alone
    ("Omar Haddad", P, [], 1),
    ("Sofia Moreau", P, [], 1),
    ("S. Moreau", P, ["Moreau"], 2),
    ("The Daily News", O, ["Daily News"], 2),
    ("Riverside Daily News", O, [], 1),
    ("City Council of Riverside", O, [], 1),
    ("Lars Lindqvist", P, [], 1),
    ("Lindqvist", O, [], 1),        # another type: never joins the person
    ("Mei Takahashi-Novak", P, ["Mei Takahashi", "Takahashi"], 3),
]


def extractions() -> list[tuple[int, Extraction]]:
    out = []
    for i, chunk in enumerate(CHUNKS):
        entities = [ExtractedEntity(name=n, type=t, summary=f"{n} is in chunk {i}.") for n, t in chunk]
        relations = [ExtractedRelation(source=a[0], relation="RELATES_TO", target=b[0], fact=f"{a[0]} met {b[0]}.")
                     for a, b in zip(chunk, chunk[1:])]
        out.append((i, Extraction(entities=entities, relations=relations)))
    return out


async def test_same_merges_as_the_pairwise_rule(minilm):
    entities, edges, stats = await resolve(extractions(), normalise(None), minilm, 0.86)
    assert [(e.name, e.type, e.aliases, e.mentions) for e in entities] == BEFORE
    assert stats == {"mentions": 31, "names": 23, "merged_by_embedding": 3, "dropped_relations": 8}
    assert len(edges) == 17


def pairwise_rule(keys: list[str], types: list[str], vecs: np.ndarray, threshold: float):
    """The rule as it was written first: every lone word against every name, then a
    union-find over every similar pair."""
    parent = list(range(len(keys)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i, k in enumerate(keys):
        if " " not in k:
            owners = [j for j, o in enumerate(keys) if j != i and o.endswith(" " + k) and types[j] == types[i]]
            if len(owners) == 1:
                parent[find(i)] = find(owners[0])
    merged = 0
    for i, j in np.argwhere(np.triu(vecs @ vecs.T, k=1) >= threshold):
        if types[i] == types[j] and find(i) != find(j):
            parent[find(i)] = find(j)
            merged += 1
    groups: dict[int, list[int]] = {}
    for i in range(len(keys)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values()), merged


def test_vectorised_merge_equals_the_pairwise_rule_on_planted_near_duplicates():
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    keys, types, vecs = [], [], []
    while len(keys) < 1500:
        key = " ".join(rng.choice(words, size=rng.integers(1, 4)))
        if key in keys:
            continue
        base = rng.standard_normal(64)
        keys.append(key)
        types.append(("Person", "Organization", "Media")[len(keys) % 3])
        vecs.append(base)
        if rng.random() < 0.3 and len(keys) < 1500:  # a near-duplicate spelling, maybe of another type
            keys.append(key + " x")
            types.append(types[-1] if rng.random() < 0.8 else "Person")
            vecs.append(base + rng.normal(scale=0.25, size=64))
    vecs = np.asarray(vecs, dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    expected = pairwise_rule(keys, types, vecs, 0.9)
    assert merge_groups(keys, types, vecs, 0.9) == expected
    assert expected[1] > 50 and len(expected[0]) < len(keys)  # both rules actually merged something


async def test_event_loop_stays_responsive_while_2000_names_are_resolved(minilm):
    data = synthetic_extractions(2000)
    async with watch_loop() as lag:
        entities, _, stats = await resolve(data, normalise(None), minilm, 0.86)
    assert stats["names"] >= 2000 and len(entities) < stats["names"]
    # Resolved on the loop, these names held it for about a second at a time.
    assert lag.worst < 0.3, f"the event loop stalled for {lag.worst * 1000:.0f} ms"
