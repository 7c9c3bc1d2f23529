"""The local knowledge graph of a simulation, in SQLite, with semantic + keyword search.

Entities carry a summary, attributes and aliases; edges carry a fact sentence with the time
it became true (``valid_at``) and stopped being true (``invalid_at``), both optional ISO text.
Reading API used by the report agent: ``search``, ``facts``, ``entity``, ``neighbours``,
``chain``, ``entities`` and ``summary``; every record has ``to_dict()`` for tool answers.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from engine.db import Database
from engine.sim.vectors import TextEmbedder, from_blob, to_blob

_STOP = {"the", "and", "for", "with", "that", "this", "from", "what", "who", "how", "why", "are", "was",
         "were", "will", "does", "did", "about", "into", "over", "their", "they", "them", "its", "his",
         "her", "has", "have", "had", "not", "but", "all", "any", "can", "say", "said", "which", "when"}
_TITLES = (r"^(?:the|mr|mrs|ms|dr|prof|professor|sir|dame|madam|president|prime minister|minister|senator|"
           r"governor|mayor|councillor|councilor|judge|chief|general|ceo|chairman|chairwoman|rep)\.?\s+")


@functools.lru_cache(maxsize=1 << 16)  # entity resolution asks again for every mention and relation
def normalise_name(name: str) -> str:
    """Lower-case, no punctuation, no leading title or article, no possessive: for matching."""
    text = name.lower().strip()
    text = re.sub(r"['’]s\b", "", text)
    text = re.sub(r"[^\w\s]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    previous = None
    while previous != text:
        previous, text = text, re.sub(_TITLES, "", text)
    return text


def keywords(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 3 and w not in _STOP}


@dataclass
class EntityRecord:
    id: int
    name: str
    type: str
    summary: str
    attributes: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    mentions: int = 1
    degree: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Fact:
    id: int
    source: str
    relation: str
    target: str
    fact: str
    valid_at: str | None = None
    invalid_at: str | None = None

    @property
    def valid(self) -> bool:
        return not self.invalid_at

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchHit:
    kind: str  # "entity" or "fact"
    score: float
    text: str
    entity: EntityRecord | None = None
    fact: Fact | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "score": round(self.score, 4), "text": self.text,
                **({"entity": self.entity.to_dict()} if self.entity else {}),
                **({"fact": self.fact.to_dict()} if self.fact else {})}


@dataclass
class NewEntity:
    name: str
    type: str
    summary: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    mentions: int = 1


@dataclass
class NewEdge:
    source: int  # index into the list of NewEntity
    target: int
    relation: str
    fact: str
    valid_at: str | None = None
    invalid_at: str | None = None
    chunk: int | None = None


@dataclass
class _Loaded:
    entities: list[EntityRecord]
    entity_vecs: np.ndarray
    facts: list[Fact]
    fact_vecs: np.ndarray
    graph: nx.MultiDiGraph


class GraphStore:
    """Reads and writes the graphs of all simulations; loaded graphs are cached per sim."""

    SEMANTIC_WEIGHT = 0.65

    def __init__(self, db: Database, embedder: TextEmbedder):
        self.db = db
        self.embedder = embedder
        self._cache: dict[str, _Loaded] = {}

    # -- writing -------------------------------------------------------------------------

    async def replace(self, sim_id: str, entities: list[NewEntity], edges: list[NewEdge]) -> None:
        """Store the graph of ``sim_id``, replacing any earlier one (the step is idempotent)."""
        ent_vecs = await self.embedder.embed([f"{e.name} ({e.type}): {e.summary}"[:1000] for e in entities])
        edge_vecs = await self.embedder.embed([e.fact[:1000] for e in edges])
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM sim_edges WHERE sim_id=?", (sim_id,))
            await conn.execute("DELETE FROM sim_entities WHERE sim_id=?", (sim_id,))
            ids = []
            for e, vec in zip(entities, ent_vecs):
                cur = await conn.execute(
                    "INSERT INTO sim_entities(sim_id, name, norm_name, type, summary, attributes, aliases,"
                    " mentions, embedding) VALUES (?,?,?,?,?,?,?,?,?)",
                    (sim_id, e.name, normalise_name(e.name), e.type, e.summary, json.dumps(e.attributes),
                     json.dumps(e.aliases), e.mentions, to_blob(vec)))
                ids.append(cur.lastrowid)
            await conn.executemany(
                "INSERT INTO sim_edges(sim_id, source_id, target_id, relation, fact, valid_at, invalid_at,"
                " chunk, embedding) VALUES (?,?,?,?,?,?,?,?,?)",
                [(sim_id, ids[e.source], ids[e.target], e.relation, e.fact, e.valid_at, e.invalid_at, e.chunk,
                  to_blob(vec)) for e, vec in zip(edges, edge_vecs)])
        self._cache.pop(sim_id, None)

    # -- reading -------------------------------------------------------------------------

    async def _load(self, sim_id: str) -> _Loaded:
        if sim_id in self._cache:
            return self._cache[sim_id]
        rows = await self.db.fetchall("SELECT * FROM sim_entities WHERE sim_id=? ORDER BY id", (sim_id,))
        by_id: dict[int, EntityRecord] = {}
        vecs = []
        for r in rows:
            by_id[r["id"]] = EntityRecord(r["id"], r["name"], r["type"], r["summary"], json.loads(r["attributes"]),
                                          json.loads(r["aliases"]), r["mentions"])
            vecs.append(from_blob(r["embedding"]))
        edge_rows = await self.db.fetchall("SELECT * FROM sim_edges WHERE sim_id=? ORDER BY id", (sim_id,))
        facts, fact_vecs = [], []
        graph = nx.MultiDiGraph()
        graph.add_nodes_from(by_id)
        for r in edge_rows:
            src, tgt = by_id[r["source_id"]], by_id[r["target_id"]]
            fact = Fact(r["id"], src.name, r["relation"], tgt.name, r["fact"], r["valid_at"], r["invalid_at"])
            facts.append(fact)
            fact_vecs.append(from_blob(r["embedding"]))
            graph.add_edge(src.id, tgt.id, key=fact.id, fact=fact)
            src.degree += 1
            tgt.degree += 1
        entities = list(by_id.values())
        loaded = _Loaded(entities, _stack(vecs), facts, _stack(fact_vecs), graph)
        self._cache[sim_id] = loaded
        return loaded

    async def entities(self, sim_id: str) -> list[EntityRecord]:
        """All entities, most connected first."""
        g = await self._load(sim_id)
        return sorted(g.entities, key=lambda e: (-e.degree, -e.mentions, e.id))

    async def facts(self, sim_id: str, include_invalid: bool = True) -> list[Fact]:
        g = await self._load(sim_id)
        return [f for f in g.facts if include_invalid or f.valid]

    async def entity(self, sim_id: str, name: str) -> EntityRecord | None:
        """The entity called ``name`` (exact, alias, or normalised), else the closest by meaning."""
        g = await self._load(sim_id)
        norm = normalise_name(name)
        for e in g.entities:
            if e.name == name or norm == normalise_name(e.name) or norm in map(normalise_name, e.aliases):
                return e
        hits = await self.search(sim_id, name, k=1, kinds=("entity",))
        return hits[0].entity if hits and hits[0].score >= 0.5 else None

    async def neighbours(self, sim_id: str, name: str, depth: int = 1) -> list[Fact]:
        """Facts on edges within ``depth`` hops of the entity (either direction)."""
        g = await self._load(sim_id)
        start = await self.entity(sim_id, name)
        if start is None:
            return []
        undirected = g.graph.to_undirected(as_view=True)
        reach = nx.single_source_shortest_path_length(undirected, start.id, cutoff=max(depth, 1))
        out = []
        for u, v, data in g.graph.edges(data=True):
            if u in reach and v in reach and min(reach[u], reach[v]) < depth:
                out.append(data["fact"])
        return sorted(out, key=lambda f: f.id)

    async def chain(self, sim_id: str, source: str, target: str, max_hops: int = 3) -> list[Fact]:
        """The facts along a shortest relation chain from one entity to another ([] if none)."""
        g = await self._load(sim_id)
        a, b = await self.entity(sim_id, source), await self.entity(sim_id, target)
        if a is None or b is None:
            return []
        undirected = nx.Graph()
        for u, v, data in g.graph.edges(data=True):
            undirected.add_edge(u, v, fact=data["fact"])
        try:
            path = nx.shortest_path(undirected, a.id, b.id)
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            return []
        if len(path) - 1 > max_hops:
            return []
        return [undirected.edges[u, v]["fact"] for u, v in zip(path, path[1:])]

    async def search(self, sim_id: str, query: str, k: int = 10,
                     kinds: tuple[str, ...] = ("entity", "fact")) -> list[SearchHit]:
        """Hybrid search: cosine similarity of embeddings blended with keyword overlap."""
        g = await self._load(sim_id)
        if not query.strip() or (not g.entities and not g.facts):
            return []
        qvec = (await self.embedder.embed([query]))[0]
        qwords = keywords(query)
        hits: list[SearchHit] = []
        if "entity" in kinds and g.entities:
            sims = g.entity_vecs @ qvec
            for e, sim in zip(g.entities, sims):
                text = f"{e.name} ({e.type}): {e.summary}"
                kw = _keyword_score(qwords, text, exact=normalise_name(e.name) in normalise_name(query))
                hits.append(SearchHit("entity", self._blend(float(sim), kw), text, entity=e))
        if "fact" in kinds and g.facts:
            sims = g.fact_vecs @ qvec
            for f, sim in zip(g.facts, sims):
                kw = _keyword_score(qwords, f"{f.source} {f.relation} {f.target} {f.fact}")
                hits.append(SearchHit("fact", self._blend(float(sim), kw), f.fact, fact=f))
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def _blend(self, semantic: float, keyword: float) -> float:
        return self.SEMANTIC_WEIGHT * semantic + (1 - self.SEMANTIC_WEIGHT) * keyword

    async def summary(self, sim_id: str, top: int = 10) -> dict[str, Any]:
        g = await self._load(sim_id)
        types: dict[str, int] = {}
        for e in g.entities:
            types[e.type] = types.get(e.type, 0) + 1
        relations: dict[str, int] = {}
        for f in g.facts:
            relations[f.relation] = relations.get(f.relation, 0) + 1
        return {"entities": len(g.entities), "facts": len(g.facts),
                "invalid_facts": sum(1 for f in g.facts if not f.valid),
                "entity_types": types, "relations": relations,
                "top_entities": [{"name": e.name, "type": e.type, "degree": e.degree}
                                 for e in (await self.entities(sim_id))[:top]]}


def _stack(vecs: list[np.ndarray]) -> np.ndarray:
    return np.vstack(vecs).astype(np.float32) if vecs else np.zeros((0, 0), dtype=np.float32)


def _keyword_score(qwords: set[str], text: str, exact: bool = False) -> float:
    if not qwords:
        return 0.0
    found = len(qwords & keywords(text)) / len(qwords)
    return min(1.0, found + (0.5 if exact else 0.0))
