"""Step 1: the ontology, the entity and relation types the knowledge graph is built with.

The LLM proposes types from the documents and the requirement; ``normalise`` then enforces
the rules whatever it returned: at most 10 entity types whose last two are always Person and
Organization (fallbacks for anyone who fits nothing else), only actors that could speak on
social media, 1-3 attributes per type with reserved names renamed, at most 10 relation types
whose source and target types exist. An unusable answer yields the two fallback types.
Descriptions and the summary are asked for in the simulation's language; names stay English
identifiers (a type name keeps only ASCII letters and digits).
"""
from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from engine import language
from engine.documents import Document, read_documents
from engine.i18n import _
from engine.llm import InvalidAnswer
from engine.llm.content_checks import ContentChecks
from engine.words import plural

if TYPE_CHECKING:
    from engine.sim.context import SimContext

log = logging.getLogger(__name__)

MAX_ENTITY_TYPES = 10
MAX_RELATION_TYPES = 10
MAX_ATTRIBUTES = 3
FALLBACK_TYPES = ("Person", "Organization")
# Graph-store field names an attribute must not shadow.
RESERVED_ATTRIBUTES = {"uuid", "name", "group_id", "name_embedding", "summary", "created_at"}
# Types that are topics, things or places rather than someone who can post.
NOT_ACTORS = {"concept", "event", "topic", "idea", "policy", "law", "technology", "product", "location",
              "place", "city", "country", "date", "time", "document", "issue", "theme", "object", "thing",
              "money", "amount", "statistic", "project", "program", "programme", "regulation", "bill",
              "report", "incident", "process", "resource", "entity", "other"}


_GROUP_WORDS = ("organization", "organisation", "company", "union", "agency", "party", "media", "outlet",
                "government", "institution", "group", "association", "business", "ngo", "body", "council",
                "ministry", "firm", "corporation", "authority", "department", "club", "team", "movement",
                "network", "newspaper", "broadcaster", "school", "university", "church", "committee")


def is_organization(type_name: str) -> bool:
    """Whether agents of this entity type speak for a group rather than as one person."""
    lowered = type_name.lower()
    return any(w in lowered for w in _GROUP_WORDS)


class Attribute(BaseModel):
    name: str
    description: str = ""


class EntityType(BaseModel):
    name: str
    description: str = ""
    attributes: list[Attribute] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class RelationType(BaseModel):
    name: str
    description: str = ""
    source_types: list[str] = Field(default_factory=list)
    target_types: list[str] = Field(default_factory=list)


class Ontology(BaseModel):
    entity_types: list[EntityType]
    relation_types: list[RelationType]
    summary: str = ""

    @property
    def type_names(self) -> list[str]:
        return [t.name for t in self.entity_types]

    def match_type(self, name: str) -> str | None:
        """The ontology type a free-text type name means, if any (case, spaces, plurals ignored)."""
        key = _key(name)
        for t in self.entity_types:
            if _key(t.name) in (key, key.rstrip("s")):
                return t.name
        return None

    def relation(self, name: str) -> RelationType | None:
        key = relation_name(name)
        return next((r for r in self.relation_types if r.name == key), None)


# What the ontology's answer must hold beyond its shape (type names are abstractions: they need
# not occur in the documents).
CHECKS = ContentChecks(texts=("entity_types[].name", "entity_types[].description?", "entity_types[].attributes[].name",
                              "relation_types[].name", "relation_types[].description?", "summary?"))


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _type_name(name: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", name)
    return "".join(w[:1].upper() + w[1:] for w in words)[:40]


def _attribute_name(name: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    snake = re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")[:40]
    if snake in RESERVED_ATTRIBUTES:
        snake = f"{snake}_value" if snake != "name" else "full_name"
    return snake


def relation_name(name: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[^A-Z0-9]+", "_", snake.upper()).strip("_")[:40]


def _fallback(name: str) -> EntityType:
    if name == "Person":
        return EntityType(name="Person", description="Any individual who does not fit a more specific type",
                          attributes=[Attribute(name="role", description="what the person does")])
    return EntityType(name="Organization", description="Any group, company, institution or body that "
                      "does not fit a more specific type",
                      attributes=[Attribute(name="sector", description="field the organization works in")])


def normalise(draft: Ontology | None) -> Ontology:
    """Enforce every rule on what the LLM proposed (or build the fallback ontology from nothing)."""
    types: list[EntityType] = []
    seen: set[str] = set(_key(n) for n in FALLBACK_TYPES)
    fallbacks: dict[str, EntityType] = {}
    for t in (draft.entity_types if draft else []):
        name = _type_name(t.name)
        key = _key(name)
        if not name or key.rstrip("s") in NOT_ACTORS or key in NOT_ACTORS:
            continue
        attrs: list[Attribute] = []
        for a in t.attributes:
            attr = _attribute_name(a.name)
            if attr and attr not in {x.name for x in attrs}:
                attrs.append(Attribute(name=attr, description=a.description.strip()[:200]))
        attrs = attrs[:MAX_ATTRIBUTES] or [Attribute(name="role", description="their role in the story")]
        cleaned = EntityType(name=name, description=t.description.strip()[:300], attributes=attrs,
                             examples=[e.strip() for e in t.examples if e.strip()][:5])
        if key in (_key(n) for n in FALLBACK_TYPES):
            fallbacks.setdefault(name, cleaned)  # keep the LLM's wording, but at the end
            continue
        if key in seen or key.rstrip("s") in seen:
            continue
        seen.add(key)
        types.append(cleaned)
    types = types[:MAX_ENTITY_TYPES - len(FALLBACK_TYPES)]
    types += [fallbacks.get(n) or _fallback(n) for n in FALLBACK_TYPES]
    ontology = Ontology(entity_types=types, relation_types=[],
                        summary=(draft.summary.strip()[:1000] if draft else ""))

    relations: list[RelationType] = []
    for r in (draft.relation_types if draft else []):
        name = relation_name(r.name)
        if not name or any(x.name == name for x in relations):
            continue
        sources = list(dict.fromkeys(m for s in r.source_types if (m := ontology.match_type(s))))
        targets = list(dict.fromkeys(m for s in r.target_types if (m := ontology.match_type(s))))
        relations.append(RelationType(name=name, description=r.description.strip()[:300],
                                      source_types=sources or list(FALLBACK_TYPES),
                                      target_types=targets or list(FALLBACK_TYPES)))
    if not relations:
        relations = [RelationType(name="RELATES_TO", description="any stated relation between two actors",
                                  source_types=ontology.type_names, target_types=ontology.type_names)]
    ontology.relation_types = relations[:MAX_RELATION_TYPES]
    return ontology


SYSTEM = """You design the ontology of a knowledge graph that will drive a social-media simulation.
Rules:
- Entity types are ACTORS that can speak or post on social media: kinds of people, groups,
  companies, institutions, media outlets. Never abstract concepts, topics, events, places,
  laws or technologies.
- Propose up to 8 specific entity types for this material; Person and Organization are added
  automatically as fallbacks, so do not propose them. Include the kinds of ordinary people the
  events touch (e.g. Resident, Student, Commuter, Customer): members of the public are drawn
  from them when the material names few actors.
- Each entity type has 1-3 attributes (snake_case), none named uuid, name, group_id,
  name_embedding, summary or created_at.
- Up to 10 relation types in UPPER_SNAKE_CASE, each with the entity types it connects.
- summary: two sentences on what the material is about."""


def excerpt(documents: list[Document], limit: int) -> str:
    """The documents' text cut to ``limit`` characters, shared fairly between documents."""
    if not documents:
        return ""
    share = limit // len(documents)
    parts = []
    for doc in documents:
        text = doc.text if len(doc.text) <= share else doc.text[:share] + " […]"
        parts.append(f"=== {doc.name} ===\n{text}")
    return "\n\n".join(parts)


def language_rule(lang: str) -> str:
    """What the ontology is written in: its words in the simulation's language, its names identifiers."""
    name = language.named(lang)
    return (f"Write descriptions, examples and the summary in {name}. Type, attribute and relation names are "
            "identifiers: keep them in English, in the cases above.")


def messages(documents: list[Document], requirement: str, limit: int, lang: str) -> list[dict]:
    """The ontology request; its words in language ``lang`` (the simulation's)."""
    return [{"role": "system", "content": f"{SYSTEM}\n{language_rule(lang)}"},
            {"role": "user", "content": f"Simulation requirement: {requirement}\n\nDocuments:\n"
                                        f"{excerpt(documents, limit)}"}]


async def step(ctx: "SimContext") -> dict:
    """Read the documents, ask for the ontology, normalise it; writes documents.json and ontology.json."""
    docs = await read_documents([ctx.folder / "documents" / name for name in ctx.spec.documents],
                                ctx.config.documents)
    ctx.path("documents.json").write_text(
        json.dumps([{"name": d.name, "pages": d.pages, "text": d.text} for d in docs], ensure_ascii=False),
        encoding="utf-8")
    await ctx.progress(0.2, _("read {documents}, {characters}",
                              documents=plural(len(docs), "{n} document", "{n} documents"),
                              characters=plural(sum(d.chars for d in docs), "{n} character", "{n} characters")))
    try:
        draft = await ctx.llm.structured(
            Ontology, messages(docs, ctx.spec.requirement, ctx.config.simulation.ontology_input_chars,
                               ctx.spec.language),
            job=ctx.job_id, scope=ctx.scope, checks=CHECKS)
        fallback = False
    except InvalidAnswer as err:
        log.warning("ontology of %s: unusable answer, using the fallback types (%s)", ctx.sim_id, err)
        draft, fallback = None, True
    ontology = normalise(draft)
    ctx.path("ontology.json").write_text(ontology.model_dump_json(indent=2), encoding="utf-8")
    return {"documents": len(docs), "chars": sum(d.chars for d in docs), "entity_types": ontology.type_names,
            "relation_types": [r.name for r in ontology.relation_types], "fallback": fallback}
