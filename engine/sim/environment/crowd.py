"""Members of the public: the agents drawn when the documents name fewer actors than were asked for.

A one-page article names a handful of people and organisations; a simulation asked for 50 agents
still runs with 50. The environment step takes the named actors first (``select_agents``), then
draws the rest from the ontology's kinds of ordinary people (``public_groups``: its person types
that are neither organisations nor office holders, such as residents, students, commuters or
customers; "member of the public" when it has none), every group drawn at least once when there
are enough places, the rest at random.

Their personas are asked in batches like the named agents' (``[simulation] persona_batch`` per
call, ``persona_concurrency`` at once, each batch cached under ``personas/crowd_NNN.json``): the
LLM invents each member (a name, age, occupation, a voice of their own, a stance, how active they
are) for the situation the documents describe. A member the LLM left out, named twice or
described unusably gets a rule-based persona (``default_member``) that still varies: its name,
temperament, stance (a spread over supportive, opposing, neutral and observer), activity (most
people post little, a few a lot), waking hours and reaction delay are drawn from the simulation's
seeded generator. Members of the public have less influence than the named actors (0.3-1.0
against 1.0 and up), so the seeded follow graph (engine.sim.run.schedule) has them follow the
actors more than each other; they follow and are followed like everyone.
"""
from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from typing import TYPE_CHECKING

from pydantic import BaseModel

from engine.i18n import _
from engine.llm import InvalidAnswer
from engine.llm.content_checks import ContentChecks
from engine.sim.environment.personas import GENDERS, MBTI, Persona, PersonaAnswer, normalise
from engine.sim.graph.store import normalise_name
from engine.sim.ontology import Ontology, is_organization

if TYPE_CHECKING:
    from engine.sim.context import SimContext

PUBLIC = "member of the public"
# Person types whose members hold an office or speak for others: named actors, not the public.
NOT_PUBLIC = ("politician", "official", "minister", "mayor", "executive", "ceo", "spokes", "journalist",
              "reporter", "leader", "director", "president", "senator", "judge", "lawyer", "manager", "officer",
              "representative", "chair", "founder", "expert", "analyst", "celebrity", "influencer")
FIRST = ("Amara", "Ben", "Chloe", "Diego", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam",
         "Maya", "Nikos", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tariq", "Uma", "Viktor", "Wen", "Ximena",
         "Yusuf", "Zoe", "Arjun", "Bea", "Carlos", "Dana", "Emil", "Fatima", "Gus", "Hana", "Ivan", "Jade",
         "Kofi", "Lena", "Mateo", "Nora")
LAST = ("Adeyemi", "Baker", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ibrahim", "Jensen",
        "Kowalski", "Lopez", "Moreau", "Novak", "Okafor", "Patel", "Quiroga", "Rossi", "Schmidt", "Tanaka",
        "Usman", "Varga", "Walsh", "Xu", "Yilmaz", "Zhang", "Almeida", "Brennan", "Chen", "Dalton")
TEMPERS = ("worried about what it means for them", "sceptical of every official line", "hopeful and outspoken",
           "pragmatic, wants the facts first", "angry and quick to post", "curious, asks a lot of questions",
           "mostly indifferent unless it touches their wallet", "loyal to their community", "sarcastic and funny",
           "cautious, shares what others post rather than writing")
STANCE_WEIGHTS = (("supportive", 0.3), ("opposing", 0.3), ("neutral", 0.25), ("observer", 0.15))


class Member(PersonaAnswer):
    """One invented member of the public: ``entity_name`` is their (invented) full name."""
    group: str


class CrowdBatch(BaseModel):
    people: list[Member]


CHECKS = ContentChecks(texts=("people[].entity_name", "people[].bio", "people[].persona", "people[].profession",
                              "people[].country?", "people[].interests[]"), items=("people",))

SYSTEM = """You invent ordinary members of the public for a social-media simulation of the situation
the user describes. Return exactly the people asked for, in the groups asked for, each different from
the others: entity_name (an invented, plausible full name, all different), group (exactly as listed),
age, gender (male or female), mbti, country, profession, interests (2-4), bio (one line, under 160
characters), persona (a paragraph: their life, what they care about, how they talk and post, how
they react to others), stance on the simulated question (supportive, opposing, neutral or observer:
mix them as real people would), activity_level (0-1: most people post rarely, a few a lot),
posts_per_hour (0-2), active_hours (0-23), response_delay_rounds (0-3). None of them is a public figure."""


def group_label(type_name: str) -> str:
    """'CollegeStudent' -> 'college student'; the fallback Person type -> 'member of the public'."""
    if type_name == "Person":
        return PUBLIC
    return " ".join(w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", type_name)) or type_name


def public_groups(ontology: Ontology) -> list[str]:
    """The ontology's kinds of ordinary people (type names); ["Person"] when it has none."""
    groups = [t.name for t in ontology.entity_types
              if t.name != "Person" and not is_organization(t.name)
              and not any(w in t.name.lower() for w in NOT_PUBLIC)]
    return groups or ["Person"]


def draw_groups(groups: list[str], count: int, rng: random.Random) -> list[str]:
    """A group for each of ``count`` members: every group once while places last, the rest at random."""
    drawn = list(groups[:count]) + [rng.choice(groups) for _ in range(max(0, count - len(groups)))]
    return sorted(drawn, key=groups.index)


def default_member(group: str, rng: random.Random, used: set[str], active_hours: list[int], requirement: str,
                   place: str) -> Persona:
    """A rule-based member of ``group`` whose name is not in ``used`` (added to it)."""
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    n = 2
    while normalise_name(name) in used:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}" if n < 20 else f"{rng.choice(FIRST)} {rng.choice(LAST)} {n}"
        n += 1
    used.add(normalise_name(name))
    label = group_label(group)
    temper = rng.choice(TEMPERS)
    stance = rng.choices([s for s, _ in STANCE_WEIGHTS], [w for _, w in STANCE_WEIGHTS])[0]
    hours = sorted(active_hours)
    if len(hours) > 6:   # an early bird, a night owl or someone in between: a window of their waking hours
        width = rng.randint(max(4, len(hours) // 2), len(hours))
        start = rng.randint(0, len(hours) - width)
        hours = hours[start:start + width]
    words = [w.lower() for w in re.findall(r"[A-Za-z][a-z]{4,}", requirement)]
    interests = list(dict.fromkeys(rng.sample(words, min(2, len(words))) + [label]))[:4]
    return Persona(
        entity_name=name, age=rng.randint(18, 80), gender=rng.choice(GENDERS[:2]), mbti=rng.choice(MBTI),
        country=place, profession=label[:80], interests=interests,
        bio=f"{name}, {label}{f' in {place}' if place != 'unknown' else ''}."[:160],
        persona=(f"{name} is a {label}, {temper}. Not a public figure: posts in a personal voice about how "
                 f"things touch daily life. Cares about: {requirement[:200]}"),
        stance=stance, activity_level=round(min(1.0, rng.betavariate(1.5, 4.0) + 0.05), 2),
        posts_per_hour=round(rng.uniform(0.2, 1.2), 2), active_hours=hours,
        response_delay_rounds=rng.randint(0, 3), from_llm=False)


def _prompt(ctx: "SimContext", ontology: Ontology, groups: list[str], place: str) -> list[dict]:
    wanted = Counter(groups)
    listing = "\n".join(f"- {group_label(g)}: {n}" for g, n in wanted.items())
    where = f"\nWhere: {place}" if place != "unknown" else ""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Simulated question: {ctx.spec.requirement}\nThe situation: "
                                        f"{ontology.summary or ctx.spec.requirement}{where}\n\n"
                                        f"Invent {len(groups)} people, by group:\n{listing}"}]


def _assign(groups: list[str], answers: list[Member], fallbacks: list[Persona], used: set[str]) -> list[Persona]:
    """Each place gets an answer of its group (else any answer left; else its fallback), under a
    name not used before: an invented name already taken (batches are asked in parallel and may
    invent the same person) gives way to the fallback's, in the persona's words too."""
    left = list(answers)
    out = []
    for group, fallback in zip(groups, fallbacks):
        label = normalise_name(group_label(group))
        pick = (next((a for a in left if normalise_name(a.group) in (label, normalise_name(group))), None)
                or (left[0] if left else None))
        if pick is None:
            out.append(fallback)
            continue
        left.remove(pick)
        name = " ".join(pick.entity_name.split())[:60]
        if not name or normalise_name(name) in used:
            if name:
                pick = pick.model_copy(update={"bio": pick.bio.replace(name, fallback.entity_name),
                                               "persona": pick.persona.replace(name, fallback.entity_name)})
            name = fallback.entity_name
        used.add(normalise_name(name))
        persona = normalise(pick, name, fallback)
        out.append(persona.model_copy(update={"profession": persona.profession or group_label(group)}))
    return out


async def generate_crowd(ctx: "SimContext", ontology: Ontology, count: int, taken: list[str],
                         active_hours: list[int], rng: random.Random,
                         place: str = "unknown") -> tuple[list[str], list[Persona]]:
    """(group, persona) of ``count`` members of the public, whose names differ from ``taken``."""
    cfg = ctx.config.simulation
    groups = draw_groups(public_groups(ontology), count, rng)
    used = {normalise_name(n) for n in taken}
    # the fallbacks' names are reserved: an invented name equal to one gives way to the fallback
    fallbacks = [default_member(g, rng, used, active_hours, ctx.spec.requirement, place) for g in groups]
    cache = ctx.folder / "personas"
    cache.mkdir(parents=True, exist_ok=True)
    slots = asyncio.Semaphore(cfg.persona_concurrency)
    batches = [list(range(i, min(i + cfg.persona_batch, count))) for i in range(0, count, cfg.persona_batch)]
    answers: list[list[Member]] = [[] for _ in batches]
    done = 0

    async def one(number: int, members: list[int]) -> None:
        nonlocal done
        path = cache / f"crowd_{number:03d}.json"
        if path.exists():
            answers[number] = CrowdBatch.model_validate_json(path.read_text(encoding="utf-8")).people
        else:
            async with slots:
                try:
                    batch = await ctx.llm.structured(CrowdBatch, _prompt(ctx, ontology, [groups[i] for i in members],
                                                                         place),
                                                     fast=True, job=ctx.job_id, scope=ctx.scope, checks=CHECKS)
                except InvalidAnswer:
                    batch = CrowdBatch(people=[])
            path.write_text(batch.model_dump_json(), encoding="utf-8")
            answers[number] = batch.people
        done += 1
        await ctx.progress(0.8 + 0.05 * done / len(batches),
                           _("members of the public: batch {done}/{total}", done=done, total=len(batches)))

    await asyncio.gather(*(one(n, m) for n, m in enumerate(batches)))
    people: list[Persona] = []
    for members, found in zip(batches, answers):   # in order, so names are settled the same on a resume
        people += _assign([groups[i] for i in members], found, [fallbacks[i] for i in members], used)
    return groups, people


def influence(persona: Persona) -> float:
    """A member of the public's weight: 0.3 to 1.0 with how active they are (named actors start at 1.0)."""
    return round(0.3 + 0.7 * persona.activity_level, 2)
