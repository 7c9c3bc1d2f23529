"""Reading a loaded simulation graph: hybrid search, lookups by name, neighbourhoods, chains.

Free functions over a ``LoadedGraph``, which is built once from the database rows and never
changed afterwards, so several worker threads may read one at the same time. ``GraphStore``
calls them through ``engine.offload.run_cpu``: a search scores every entity and fact of a
graph (a matrix product plus keyword matching in Python), which must not hold the event loop.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import networkx as nx
import numpy as np

from engine.sim.graph.model import EntityRecord, Fact, SearchHit, keywords, normalise_name
from engine.sim.graph.vectors import from_blob

SEMANTIC_WEIGHT = 0.65


@dataclass(frozen=True)
class LoadedGraph:
    entities: list[EntityRecord]
    entity_vecs: np.ndarray
    facts: list[Fact]
    fact_vecs: np.ndarray
    graph: nx.MultiDiGraph


def build(entity_rows: Iterable[Mapping[str, Any]], edge_rows: Iterable[Mapping[str, Any]]) -> LoadedGraph:
    """The graph of one simulation from its ``sim_entities`` and ``sim_edges`` rows."""
    by_id: dict[int, EntityRecord] = {}
    vecs = []
    for r in entity_rows:
        by_id[r["id"]] = EntityRecord(r["id"], r["name"], r["type"], r["summary"], json.loads(r["attributes"]),
                                      json.loads(r["aliases"]), r["mentions"])
        vecs.append(from_blob(r["embedding"]))
    facts: list[Fact] = []
    fact_vecs: list[np.ndarray | None] = []
    graph: nx.MultiDiGraph = nx.MultiDiGraph()
    graph.add_nodes_from(by_id)
    for r in edge_rows:
        src, tgt = by_id[r["source_id"]], by_id[r["target_id"]]
        fact = Fact(r["id"], src.name, r["relation"], tgt.name, r["fact"], r["valid_at"], r["invalid_at"])
        facts.append(fact)
        fact_vecs.append(from_blob(r["embedding"]))
        graph.add_edge(src.id, tgt.id, key=fact.id, fact=fact)
        src.degree += 1
        tgt.degree += 1
    return LoadedGraph(list(by_id.values()), _stack(vecs), facts, _stack(fact_vecs), graph)


def _stack(vecs: list[np.ndarray | None]) -> np.ndarray:
    """The vectors as rows (the graph's entities and facts all have one)."""
    return np.vstack(vecs).astype(np.float32) if vecs else np.zeros((0, 0), dtype=np.float32)  # type: ignore[arg-type]  # no None among them


def by_degree(g: LoadedGraph) -> list[EntityRecord]:
    """All entities, most connected first."""
    return sorted(g.entities, key=lambda e: (-e.degree, -e.mentions, e.id))


def rank(g: LoadedGraph, query: str, qvec: np.ndarray, k: int, kinds: tuple[str, ...]) -> list[SearchHit]:
    """The ``k`` best hits: cosine similarity blended with keyword overlap."""
    qwords = keywords(query)
    hits: list[SearchHit] = []
    if "entity" in kinds and g.entities:
        sims = g.entity_vecs @ qvec
        norm_query = normalise_name(query)
        for e, sim in zip(g.entities, sims):
            text = f"{e.name} ({e.type}): {e.summary}"
            kw = _keyword_score(qwords, text, exact=normalise_name(e.name) in norm_query)
            hits.append(SearchHit("entity", _blend(float(sim), kw), text, entity=e))
    if "fact" in kinds and g.facts:
        sims = g.fact_vecs @ qvec
        for f, sim in zip(g.facts, sims):
            kw = _keyword_score(qwords, f"{f.source} {f.relation} {f.target} {f.fact}")
            hits.append(SearchHit("fact", _blend(float(sim), kw), f.fact, fact=f))
    hits.sort(key=lambda h: -h.score)
    return hits[:k]


def _blend(semantic: float, keyword: float) -> float:
    return SEMANTIC_WEIGHT * semantic + (1 - SEMANTIC_WEIGHT) * keyword


def _keyword_score(qwords: set[str], text: str, exact: bool = False) -> float:
    if not qwords:
        return 0.0
    found = len(qwords & keywords(text)) / len(qwords)
    return min(1.0, found + (0.5 if exact else 0.0))


def named(g: LoadedGraph, name: str) -> EntityRecord | None:
    """The entity called ``name``: exactly, by an alias, or normalised."""
    norm = normalise_name(name)
    for e in g.entities:
        if e.name == name or norm == normalise_name(e.name) or norm in map(normalise_name, e.aliases):
            return e
    return None


def neighbour_facts(g: LoadedGraph, start: int, depth: int) -> list[Fact]:
    """Facts on edges within ``depth`` hops of entity ``start`` (either direction)."""
    undirected = g.graph.to_undirected(as_view=True)
    reach = nx.single_source_shortest_path_length(undirected, start, cutoff=max(depth, 1))
    out = [data["fact"] for u, v, data in g.graph.edges(data=True)
           if u in reach and v in reach and min(reach[u], reach[v]) < depth]
    return sorted(out, key=lambda f: f.id)


def chain_facts(g: LoadedGraph, source: int, target: int, max_hops: int) -> list[Fact]:
    """The facts along a shortest relation chain between two entities ([] if none)."""
    undirected: nx.Graph = nx.Graph()
    for u, v, data in g.graph.edges(data=True):
        undirected.add_edge(u, v, fact=data["fact"])
    try:
        path = nx.shortest_path(undirected, source, target)
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return []
    if len(path) - 1 > max_hops:
        return []
    return [undirected.edges[u, v]["fact"] for u, v in zip(path, path[1:])]


def summarise(g: LoadedGraph, top: int) -> dict[str, Any]:
    types: dict[str, int] = {}
    for e in g.entities:
        types[e.type] = types.get(e.type, 0) + 1
    relations: dict[str, int] = {}
    for f in g.facts:
        relations[f.relation] = relations.get(f.relation, 0) + 1
    return {"entities": len(g.entities), "facts": len(g.facts),
            "invalid_facts": sum(1 for f in g.facts if not f.valid),
            "entity_types": types, "relations": relations,
            "top_entities": [{"name": e.name, "type": e.type, "degree": e.degree} for e in by_degree(g)[:top]]}
