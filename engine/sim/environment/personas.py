"""Personas of the simulation's agents, asked in batches and normalised, with rule-based defaults.

One structured call covers up to ``simulation.persona_batch`` (15) agents; batches run in
parallel up to ``simulation.persona_concurrency``. Each batch's answer is cached under
``<folder>/personas/`` so a resumed step does not ask again. Any agent the LLM left out or
described unusably gets a persona built from its graph entity, so the step always completes.
Personas are written in the simulation's language (its enumerated fields keep their English values).
"""
from __future__ import annotations

import asyncio
import json
import random
import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from engine import language
from engine.i18n import _
from engine.llm import InvalidAnswer
from engine.llm.content_checks import ContentChecks
from engine.sim.environment.models import Stance
from engine.sim.graph.store import EntityRecord, normalise_name
from engine.sim.ontology import is_organization

if TYPE_CHECKING:
    from engine.sim.context import SimContext

MBTI = [a + b + c + d for a in "EI" for b in "NS" for c in "TF" for d in "JP"]
STANCES = ("supportive", "opposing", "neutral", "observer")
GENDERS = ("male", "female", "other")


class PersonaAnswer(BaseModel):
    entity_name: str
    age: int
    gender: str
    mbti: str
    country: str
    profession: str
    interests: list[str]
    bio: str
    persona: str
    stance: str
    activity_level: float
    posts_per_hour: float
    active_hours: list[int]
    response_delay_rounds: int


class PersonaBatch(BaseModel):
    personas: list[PersonaAnswer]


# Each persona is an item: one that is still junk after the retries is dropped, and its agent gets
# the persona built from the graph (``default_persona``), like an agent the LLM left out.
CHECKS = ContentChecks(texts=("personas[].bio", "personas[].persona", "personas[].profession",
                              "personas[].country?", "personas[].interests[]"),
                       names=("personas[].entity_name",), items=("personas",))


class Persona(BaseModel):
    """A normalised persona: every field valid and usable by the run step."""
    entity_name: str
    age: int = Field(ge=1, le=120)
    gender: str
    mbti: str
    country: str
    profession: str
    interests: list[str]
    bio: str
    persona: str
    stance: Stance
    activity_level: float = Field(ge=0.0, le=1.0)
    posts_per_hour: float = Field(ge=0.0, le=10.0)
    active_hours: list[int]
    response_delay_rounds: int = Field(ge=0, le=12)
    from_llm: bool = True


def default_persona(entity: EntityRecord, rng: random.Random, active_hours: list[int],
                    requirement: str) -> Persona:
    """A persona from the graph alone, used when the LLM's is missing or unusable."""
    is_org = is_organization(entity.type)
    role = entity.attributes.get("role") or entity.attributes.get("sector") or entity.type
    summary = entity.summary or f"{entity.name} is a {entity.type.lower()} involved in the events."
    return Persona(
        entity_name=entity.name,
        age=rng.randint(5, 60) if is_org else rng.randint(22, 68),
        gender="other" if is_org else rng.choice(("male", "female")),
        mbti=rng.choice(MBTI),
        country="unknown",
        profession=str(role)[:80],
        interests=[w for w in _topics(summary + " " + requirement)][:4] or [entity.type.lower()],
        bio=summary[:160],
        persona=(f"{entity.name} ({entity.type}). {summary} "
                 f"{'Speaks for the organization in an official tone.' if is_org else 'Posts in a personal voice.'} "
                 f"Cares about: {requirement[:200]}"),
        stance="neutral",
        activity_level=round(min(1.0, 0.3 + 0.1 * entity.degree), 2),
        posts_per_hour=0.5 if is_org else 1.0,
        active_hours=list(active_hours),
        response_delay_rounds=1 if is_org else 0,
        from_llm=False,
    )


def _topics(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z][a-z]{5,}", text)
    seen: list[str] = []
    for w in words:
        if w.lower() not in seen:
            seen.append(w.lower())
    return seen


def normalise(answer: PersonaAnswer, name: str, fallback: Persona) -> Persona:
    """Keep what is usable from the LLM's persona of ``name``, take the rest from the fallback."""
    gender = answer.gender.strip().lower()
    gender = {"m": "male", "man": "male", "f": "female", "woman": "female"}.get(gender, gender)
    mbti = answer.mbti.strip().upper()
    hours = sorted({h for h in answer.active_hours if 0 <= h <= 23})
    stance = answer.stance.strip().lower()
    return Persona(
        entity_name=name,
        age=answer.age if 1 <= answer.age <= 120 else fallback.age,
        gender=gender if gender in GENDERS else fallback.gender,
        mbti=mbti if mbti in MBTI else fallback.mbti,
        country=answer.country.strip()[:60] or fallback.country,
        profession=answer.profession.strip()[:80] or fallback.profession,
        interests=[i.strip()[:40] for i in answer.interests if i.strip()][:6] or fallback.interests,
        bio=answer.bio.strip()[:300] or fallback.bio,
        persona=answer.persona.strip()[:3000] or fallback.persona,
        stance=stance if stance in STANCES else fallback.stance,
        activity_level=min(1.0, max(0.0, answer.activity_level)),
        posts_per_hour=min(10.0, max(0.0, answer.posts_per_hour)),
        active_hours=hours or fallback.active_hours,
        response_delay_rounds=min(12, max(0, answer.response_delay_rounds)),
    )


SYSTEM = """You write social-media personas for the agents of a simulation.
For each entity the user lists, return one persona with entity_name exactly as given:
age (an organization: years since founding), gender (male, female, or other for organizations),
mbti (e.g. INTJ), country, profession, interests (2-5), bio (one line, under 160 characters),
persona (a paragraph: background, values, how and what they post, how they react to others),
stance on the simulated question (supportive, opposing, neutral or observer),
activity_level (0-1), posts_per_hour (0-5), active_hours (0-23, local time of the simulation),
response_delay_rounds (0-3: how long before reacting to news). Ground everything in the facts given."""


def language_rule(lang: str) -> str:
    name = language.named(lang)
    return (f"Write country, profession, interests, bio and persona in {name} (the persona says the agent posts "
            f"in {name}); gender, mbti and stance take the English values above.")


def batch_prompt(entities: list[EntityRecord], facts: dict[str, list[str]], requirement: str,
                 lang: str) -> list[dict]:
    """One batch's request; the personas' words in language ``lang`` (the simulation's)."""
    lines = []
    for e in entities:
        known = "; ".join(facts.get(e.name, [])[:6])
        lines.append(f"- {e.name} [{e.type}]: {e.summary or 'no summary'}" + (f" Facts: {known}" if known else ""))
    return [{"role": "system", "content": f"{SYSTEM}\n{language_rule(lang)}"},
            {"role": "user", "content": f"Simulated question: {requirement}\n\nEntities:\n" + "\n".join(lines)}]


def batch_members(count: int, size: int) -> list[list[int]]:
    """The agents (by index) of each persona request: ``size`` per request, in order."""
    return [list(range(i, min(i + size, count))) for i in range(0, count, size)]


async def generate(ctx: "SimContext", entities: list[EntityRecord], active_hours: list[int],
                   rng: random.Random) -> list[Persona]:
    """Personas for ``entities`` in order (batched, bounded, cached, defaults for gaps)."""
    cfg = ctx.config.simulation
    facts: dict[str, list[str]] = {}
    assert ctx.graph is not None  # the pipeline hands every step the graph store
    for f in await ctx.graph.facts(ctx.sim_id, include_invalid=False):
        facts.setdefault(f.source, []).append(f.fact)
        facts.setdefault(f.target, []).append(f.fact)
    fallbacks = [default_persona(e, rng, active_hours, ctx.spec.requirement) for e in entities]
    batches = batch_members(len(entities), cfg.persona_batch)
    cache = ctx.folder / "personas"
    cache.mkdir(parents=True, exist_ok=True)
    slots = asyncio.Semaphore(cfg.persona_concurrency)
    result: list[Persona] = list(fallbacks)
    done = 0

    async def one(number: int, members: list[int]) -> None:
        nonlocal done
        path = cache / f"batch_{number:03d}.json"
        if path.exists():
            answers = PersonaBatch.model_validate_json(path.read_text(encoding="utf-8")).personas
        else:
            async with slots:
                try:
                    names = "\n".join(entities[i].name for i in members)
                    batch = await ctx.llm.structured(
                        PersonaBatch, batch_prompt([entities[i] for i in members], facts, ctx.spec.requirement,
                                                   ctx.spec.language),
                        fast=True, job=ctx.job_id, scope=ctx.scope, checks=CHECKS.for_source(names))
                except InvalidAnswer:
                    batch = PersonaBatch(personas=[])
            path.write_text(batch.model_dump_json(), encoding="utf-8")
            answers = batch.personas
        by_name = {normalise_name(a.entity_name): a for a in answers}
        for i in members:
            answer = by_name.get(normalise_name(entities[i].name))
            if answer is not None:
                result[i] = normalise(answer, entities[i].name, fallbacks[i])
        done += 1
        await ctx.progress(0.1 + 0.7 * done / len(batches), _("personas: batch {done}/{total}", done=done,
                                                              total=len(batches)))

    await asyncio.gather(*(one(n, m) for n, m in enumerate(batches)))
    return result


def as_json(personas: list[Persona]) -> str:
    return json.dumps([p.model_dump() for p in personas], ensure_ascii=False, indent=1)
