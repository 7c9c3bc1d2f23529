"""The local knowledge graph of a simulation, in the bot's database, with semantic + keyword search.

Entities carry a summary, attributes and aliases; edges carry a fact sentence with the time
it became true (``valid_at``) and stopped being true (``invalid_at``), both optional ISO text.
Reading API used by the report agent: ``search``, ``facts``, ``entity``, ``neighbours``,
``chain``, ``entities`` and ``summary``; every record has ``to_dict()`` for tool answers.
``draw`` makes the pictures /graph posts (``view``).

This class is a facade: records and name rules live in ``model``, the reading work in
``search``, run off the event loop. Loaded graphs are kept in a least-recently-used cache
of ``cache_size`` simulations (``[simulation] graph_cache_size``), so a bot that has run many
simulations keeps only the graphs it is reading.

This module owns ``sim_entities`` and ``sim_edges`` (tests/test_sql_owners.py): a fork or an
ensemble's run gets its copy of a graph through ``copy_graph``.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.db import Database
from engine.offload import run_cpu
from engine.sim.graph import search as graphsearch
from engine.sim.graph.model import EntityRecord, Fact, NewEdge, NewEntity, SearchHit, normalise_name
from engine.sim.graph.search import LoadedGraph
from engine.sim.graph.vectors import TextEmbedder, to_blob

if TYPE_CHECKING:
    from engine.sim.graph.view import GraphPicture


def entity_text(name: str, type_: str, summary: str) -> str:
    """What an entity's vector is computed from."""
    return f"{name} ({type_}): {summary}"[:1000]


def edge_text(fact: str) -> str:
    """What a fact's vector is computed from."""
    return fact[:1000]


__all__ = ["EntityRecord", "Fact", "GraphStore", "NewEdge", "NewEntity", "SearchHit", "normalise_name"]


async def copy_graph(conn: Any, dialect: str, parent_id: str, sim_id: str) -> None:
    """Within a transaction (``conn``): a copy of ``parent_id``'s knowledge graph rows under
    ``sim_id`` (rows are keyed by simulation; the copies get new ids, edges follow their ends)."""
    cur = await conn.execute(
        "SELECT (SELECT coalesce(max(id), 0) FROM sim_entities) - coalesce(min(id), 0) + 1"
        " FROM sim_entities WHERE sim_id=?", (parent_id,))
    offset = (await cur.fetchone())[0]
    await conn.execute(
        "INSERT INTO sim_entities(id, sim_id, name, norm_name, type, summary, attributes, aliases, mentions,"
        " embedding) SELECT id + ?, ?, name, norm_name, type, summary, attributes, aliases, mentions, embedding"
        " FROM sim_entities WHERE sim_id=? ORDER BY id", (offset, sim_id, parent_id))
    if dialect == "postgresql":   # explicit ids leave the identity sequence behind them
        await conn.execute("SELECT setval(pg_get_serial_sequence('sim_entities', 'id'),"
                           " (SELECT max(id) FROM sim_entities))")
    await conn.execute(
        "INSERT INTO sim_edges(sim_id, source_id, target_id, relation, fact, valid_at, invalid_at, chunk,"
        " embedding) SELECT ?, source_id + ?, target_id + ?, relation, fact, valid_at, invalid_at, chunk,"
        " embedding FROM sim_edges WHERE sim_id=? ORDER BY id", (sim_id, offset, offset, parent_id))


class GraphStore:
    """Reads and writes the graphs of all simulations; the ``cache_size`` most recently read
    graphs stay loaded."""

    def __init__(self, db: Database, embedder: TextEmbedder, cache_size: int = 8):
        self.db = db
        self.embedder = embedder
        self.cache_size = max(1, cache_size)
        self._cache: OrderedDict[str, LoadedGraph] = OrderedDict()

    # -- writing -------------------------------------------------------------------------

    async def replace(self, sim_id: str, entities: list[NewEntity], edges: list[NewEdge]) -> None:
        """Store the graph of ``sim_id``, replacing any earlier one (the step is idempotent)."""
        ent_vecs = await self.embedder.embed([entity_text(e.name, e.type, e.summary) for e in entities])
        edge_vecs = await self.embedder.embed([edge_text(e.fact) for e in edges])
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM sim_edges WHERE sim_id=?", (sim_id,))
            await conn.execute("DELETE FROM sim_entities WHERE sim_id=?", (sim_id,))
            ids = []
            for e, vec in zip(entities, ent_vecs):
                async with conn.execute(
                    "INSERT INTO sim_entities(sim_id, name, norm_name, type, summary, attributes, aliases,"
                    " mentions, embedding) VALUES (?,?,?,?,?,?,?,?,?) RETURNING id",
                    (sim_id, e.name, normalise_name(e.name), e.type, e.summary, json.dumps(e.attributes),
                     json.dumps(e.aliases), e.mentions, to_blob(vec))) as cur:
                    ids.append((await cur.fetchone())[0])
            await conn.executemany(
                "INSERT INTO sim_edges(sim_id, source_id, target_id, relation, fact, valid_at, invalid_at,"
                " chunk, embedding) VALUES (?,?,?,?,?,?,?,?,?)",
                [(sim_id, ids[e.source], ids[e.target], e.relation, e.fact, e.valid_at, e.invalid_at, e.chunk,
                  to_blob(vec)) for e, vec in zip(edges, edge_vecs)])
        self._cache.pop(sim_id, None)

    # -- reading -------------------------------------------------------------------------

    @property
    def cached(self) -> list[str]:
        """The simulations whose graphs are loaded, least recently used first."""
        return list(self._cache)

    async def _load(self, sim_id: str) -> LoadedGraph:
        if sim_id in self._cache:
            self._cache.move_to_end(sim_id)
            return self._cache[sim_id]
        rows = await self.db.fetchall("SELECT * FROM sim_entities WHERE sim_id=? ORDER BY id", (sim_id,))
        edge_rows = await self.db.fetchall("SELECT * FROM sim_edges WHERE sim_id=? ORDER BY id", (sim_id,))
        loaded = await run_cpu(graphsearch.build, rows, edge_rows)
        self._cache[sim_id] = loaded
        self._cache.move_to_end(sim_id)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return loaded

    async def entities(self, sim_id: str) -> list[EntityRecord]:
        """All entities, most connected first."""
        return await run_cpu(graphsearch.by_degree, await self._load(sim_id))

    async def facts(self, sim_id: str, include_invalid: bool = True) -> list[Fact]:
        g = await self._load(sim_id)
        return [f for f in g.facts if include_invalid or f.valid]

    async def entity(self, sim_id: str, name: str) -> EntityRecord | None:
        """The entity called ``name`` (exact, alias, or normalised), else the closest by meaning."""
        found = await run_cpu(graphsearch.named, await self._load(sim_id), name)
        if found is not None:
            return found
        hits = await self.search(sim_id, name, k=1, kinds=("entity",))
        return hits[0].entity if hits and hits[0].score >= 0.5 else None

    async def neighbours(self, sim_id: str, name: str, depth: int = 1) -> list[Fact]:
        """Facts on edges within ``depth`` hops of the entity (either direction)."""
        g = await self._load(sim_id)
        start = await self.entity(sim_id, name)
        if start is None:
            return []
        return await run_cpu(graphsearch.neighbour_facts, g, start.id, depth)

    async def chain(self, sim_id: str, source: str, target: str, max_hops: int = 3) -> list[Fact]:
        """The facts along a shortest relation chain from one entity to another ([] if none)."""
        g = await self._load(sim_id)
        a, b = await self.entity(sim_id, source), await self.entity(sim_id, target)
        if a is None or b is None:
            return []
        return await run_cpu(graphsearch.chain_facts, g, a.id, b.id, max_hops)

    async def search(self, sim_id: str, query: str, k: int = 10,
                     kinds: tuple[str, ...] = ("entity", "fact")) -> list[SearchHit]:
        """Hybrid search: cosine similarity of embeddings blended with keyword overlap."""
        g = await self._load(sim_id)
        if not query.strip() or (not g.entities and not g.facts):
            return []
        qvec = (await self.embedder.embed([query], kind="query"))[0]
        return await run_cpu(graphsearch.rank, g, query, qvec, k, kinds)

    async def summary(self, sim_id: str, top: int = 10) -> dict:
        return await run_cpu(graphsearch.summarise, await self._load(sim_id), top)

    async def draw(self, sim_id: str, out_dir: Path, title: str) -> "GraphPicture":
        """The graph as a PNG and a self-contained HTML page in ``out_dir`` (engine.sim.graph.view)."""
        from engine.sim.graph import view  # on first use: Bokeh takes a second or more to import
        return await run_cpu(view.draw, await self._load(sim_id), out_dir, title)
