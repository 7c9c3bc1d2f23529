"""Step 2: the knowledge graph, extracted chunk by chunk against the ontology.

Each chunk (500 characters, 50 overlap, cut at sentence ends) goes to the fast model with
the ontology; answers are cached per chunk in ``<folder>/extraction/`` so an interrupted
step resumes without asking again. Entity resolution then makes one node per actor: names
are normalised (case, punctuation, titles, possessives), a lone surname joins the one full
name that ends with it, and names of one type whose embeddings are closer than
``simulation.entity_merge_similarity`` merge (``entity_merge``, vectorised, off the event loop).
The result is stored by ``GraphStore``.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from engine import language
from engine.i18n import _
from engine.llm import InvalidAnswer
from engine.llm.content_checks import ContentChecks, text_problem
from engine.offload import run_cpu
from engine.sim.graph.chunking import Chunk, chunk_documents
from engine.sim.graph.entity_merge import merge_groups
from engine.sim.graph.store import NewEdge, NewEntity, normalise_name
from engine.sim.ontology import Ontology, relation_name

if TYPE_CHECKING:
    from engine.sim.context import SimContext

log = logging.getLogger(__name__)

ORG_WORDS = {"inc", "ltd", "llc", "corp", "corporation", "company", "co", "group", "party", "union", "council",
             "ministry", "department", "agency", "association", "committee", "university", "bank", "news",
             "times", "post", "institute", "foundation", "federation", "government", "office", "board",
             "commission", "club", "team", "church", "police", "army", "court", "parliament", "congress"}
# An entity's summary: its chunks' one-sentence summaries in order of appearance, cut at a word
# within this many characters (the design's length; personas and reports read it).
SUMMARY_CHARS = 300


class ExtractedAttribute(BaseModel):
    name: str
    value: str


class ExtractedEntity(BaseModel):
    name: str
    type: str
    summary: str = ""
    attributes: list[ExtractedAttribute] = Field(default_factory=list)


class ExtractedRelation(BaseModel):
    source: str
    relation: str
    target: str
    fact: str
    valid_at: str = ""
    invalid_at: str = ""


class Extraction(BaseModel):
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relations: list[ExtractedRelation] = Field(default_factory=list)


# A chunk's extraction must name only actors its text names, in complete sentences; what still
# fails after the retries is dropped (one entity, one relation), not the chunk or the graph.
# Attribute values are optional: a placeholder one (such as "N/A") is left out, failing nothing.
CHECKS = ContentChecks(texts=("entities[].name", "entities[].summary?", "relations[].relation", "relations[].fact"),
                       names=("entities[].name", "relations[].source", "relations[].target"),
                       items=("entities", "relations"))


def extraction_prompt(ontology: Ontology, lang: str) -> str:
    """The system prompt of every chunk; summaries and facts in language ``lang`` (the simulation's)."""
    name = language.named(lang)
    types = "\n".join(f"- {t.name}: {t.description} (attributes: {', '.join(a.name for a in t.attributes)})"
                      for t in ontology.entity_types)
    relations = "\n".join(f"- {r.name}: {r.description} ({'/'.join(r.source_types)} -> {'/'.join(r.target_types)})"
                          for r in ontology.relation_types)
    return f"""Extract a knowledge graph from the text the user sends.
Entity types (actors only; use Person or Organization when no specific type fits):
{types}
Relation types:
{relations}
Rules:
- entities: every actor named in the text, with its full name as written, its type from the
  list, a one-sentence summary of what the text says about it, and attribute values the text states.
- relations: only between extracted entities, with a relation type from the list, and a fact:
  one self-contained sentence stating the relation. valid_at / invalid_at: ISO date when the
  text says when it began / ended, else "".
- Extract nothing that is not in the text.
- Names exactly as the text writes them; write summaries, attribute values and facts in {name}."""


@dataclass
class _Node:
    name: str
    norm: str
    types: Counter = field(default_factory=Counter)
    summaries: list[str] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    aliases: set[str] = field(default_factory=set)
    mentions: int = 0

    @property
    def type(self) -> str:
        return self.types.most_common(1)[0][0]


def guess_type(name: str, raw_type: str, ontology: Ontology) -> str:
    """The ontology type for an extracted entity: its own if known, else Person or Organization."""
    found = ontology.match_type(raw_type)
    if found:
        return found
    words = set(re.findall(r"[a-z]+", f"{name} {raw_type}".lower()))
    return "Organization" if words & ORG_WORDS or name.isupper() else "Person"


def collect_nodes(extractions: list[tuple[int, Extraction]], ontology: Ontology) -> dict[str, _Node]:
    """One node per normalised name, with everything the chunks said about it."""
    nodes: dict[str, _Node] = {}
    for _index, ex in extractions:
        for e in ex.entities:
            norm = normalise_name(e.name)
            if not norm:
                continue
            node = nodes.setdefault(norm, _Node(e.name.strip(), norm))
            node.mentions += 1
            node.types[guess_type(e.name, e.type, ontology)] += 1
            node.aliases.add(e.name.strip())
            if len(e.name.strip()) > len(node.name):
                node.name = e.name.strip()
            if e.summary.strip() and e.summary.strip() not in node.summaries:
                node.summaries.append(e.summary.strip())
            for a in e.attributes:
                if text_problem(a.value) is None:
                    node.attributes.setdefault(a.name.strip(), a.value.strip())
    # Relation endpoints the extractor forgot to list as entities still deserve a node.
    for _index, ex in extractions:
        for r in ex.relations:
            for name in (r.source, r.target):
                norm = normalise_name(name)
                if norm and norm not in nodes:
                    node = nodes[norm] = _Node(name.strip(), norm, mentions=1)
                    node.types[guess_type(name, "", ontology)] += 1
                    node.aliases.add(name.strip())
    return nodes


def build_graph(extractions: list[tuple[int, Extraction]], ontology: Ontology, nodes: dict[str, _Node],
                vecs: np.ndarray | None, threshold: float) -> tuple[list[NewEntity], list[NewEdge], dict]:
    """Merge the nodes into entities (``entity_merge``) and attach the relations to them."""
    keys = list(nodes)
    groups, merged_by_embedding = merge_groups(keys, [nodes[k].type for k in keys], vecs, threshold)
    entities: list[NewEntity] = []
    entity_of: dict[str, int] = {}
    for group in groups:
        members = [keys[i] for i in group]
        parts = [nodes[m] for m in members]
        main = max(parts, key=lambda n: (len(n.name.split()), n.mentions, len(n.name)))
        types: Counter[str] = Counter()
        summaries: dict[str, None] = {}
        attributes: dict[str, Any] = {}
        aliases: set[str] = set()
        for p in parts:
            types.update(p.types)
            summaries.update(dict.fromkeys(p.summaries))  # each once, in order of appearance
            for key, value in p.attributes.items():
                attributes.setdefault(key, value)
            aliases |= p.aliases
        summary = " ".join(summaries)
        if len(summary) > SUMMARY_CHARS:
            summary = summary[:SUMMARY_CHARS].rsplit(" ", 1)[0] + "…"
        for m in members:
            entity_of[m] = len(entities)
        entities.append(NewEntity(main.name, types.most_common(1)[0][0], summary, attributes,
                                  sorted(aliases - {main.name}), sum(p.mentions for p in parts)))

    edges: list[NewEdge] = []
    seen: set[tuple] = set()
    dropped = 0
    for chunk_index, ex in extractions:
        for r in ex.relations:
            src, tgt = entity_of.get(normalise_name(r.source)), entity_of.get(normalise_name(r.target))
            fact = r.fact.strip()
            if src is None or tgt is None or src == tgt or not fact:
                dropped += 1
                continue
            known = ontology.relation(r.relation)
            relation = known.name if known else (relation_name(r.relation) or "RELATES_TO")
            edge = (src, relation, tgt, normalise_name(fact))
            if edge in seen:
                continue
            seen.add(edge)
            edges.append(NewEdge(src, tgt, relation, fact, _date(r.valid_at), _date(r.invalid_at), chunk_index))
    stats = {"mentions": sum(n.mentions for n in nodes.values()), "names": len(nodes),
             "merged_by_embedding": merged_by_embedding, "dropped_relations": dropped}
    return entities, edges, stats


async def resolve(extractions: list[tuple[int, Extraction]], ontology: Ontology, embedder,
                  threshold: float) -> tuple[list[NewEntity], list[NewEdge], dict]:
    """Merge the per-chunk extractions into one graph (one node per actor). The work runs off
    the event loop: thousands of names take seconds of Python and matrix work."""
    nodes = await run_cpu(collect_nodes, extractions, ontology)
    vecs = await embedder.embed([n.name for n in nodes.values()]) if len(nodes) > 1 else None
    return await run_cpu(build_graph, extractions, ontology, nodes, vecs, threshold)


def _date(value: str) -> str | None:
    value = (value or "").strip()
    return value if re.match(r"^\d{4}(-\d{2}(-\d{2})?)?", value) else None


async def extract_chunks(ctx: "SimContext", chunks: list[Chunk], ontology: Ontology) -> list[tuple[int, Extraction]]:
    """Ask the fast model for each chunk (bounded concurrency), reusing cached answers."""
    cache = ctx.folder / "extraction"
    cache.mkdir(parents=True, exist_ok=True)
    system = extraction_prompt(ontology, ctx.spec.language)
    slots = asyncio.Semaphore(ctx.config.simulation.extract_concurrency)
    done = 0
    results: dict[int, Extraction] = {}

    async def one(chunk: Chunk) -> None:
        nonlocal done
        path = cache / f"{chunk.index:05d}.json"
        if path.exists():
            results[chunk.index] = Extraction.model_validate_json(path.read_text(encoding="utf-8"))
        else:
            async with slots:
                try:
                    ex = await ctx.llm.structured(
                        Extraction, [{"role": "system", "content": system},
                                     {"role": "user", "content": f"Source: {chunk.document}\n\n{chunk.text}"}],
                        fast=True, job=ctx.job_id, scope=ctx.scope, checks=CHECKS.for_source(chunk.text))
                except InvalidAnswer as err:
                    log.warning("chunk %d of %s: no usable extraction (%s)", chunk.index, ctx.sim_id, err)
                    ex = Extraction()
            results[chunk.index] = ex
            path.write_text(ex.model_dump_json(), encoding="utf-8")
        done += 1
        await ctx.progress(done / len(chunks) * 0.9, _("extracted {done}/{total} chunks", done=done, total=len(chunks)))

    await asyncio.gather(*(one(c) for c in chunks))
    return [(i, results[i]) for i in sorted(results)]


async def step(ctx: "SimContext") -> dict:
    ontology = Ontology.model_validate_json(ctx.path("ontology.json").read_text(encoding="utf-8"))
    texts = json.loads(ctx.path("documents.json").read_text(encoding="utf-8"))
    sim_cfg = ctx.config.simulation
    chunks = chunk_documents([(d["name"], d["text"]) for d in texts], sim_cfg.chunk_chars, sim_cfg.chunk_overlap)
    extractions = await extract_chunks(ctx, chunks, ontology)
    await ctx.progress(0.92, _("resolving entities"))
    entities, edges, stats = await resolve(extractions, ontology, ctx.embedder, sim_cfg.entity_merge_similarity)
    assert ctx.graph is not None  # the pipeline hands every step the graph store
    await ctx.graph.replace(ctx.sim_id, entities, edges)
    summary = await ctx.graph.summary(ctx.sim_id)
    ctx.path("graph_summary.json").write_text(json.dumps({**summary, **stats, "chunks": len(chunks)}, indent=2),
                                              encoding="utf-8")
    return {"chunks": len(chunks), "entities": summary["entities"], "facts": summary["facts"], **stats}

