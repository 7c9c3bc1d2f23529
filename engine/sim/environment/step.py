"""Step 3: the agent environment, everything the run step needs, as SimulationConfig.

- Agents: one per graph entity of a speakable type (every ontology type is an actor), most
  connected first, capped by the request and ``simulation.max_agents``; when the documents name
  fewer actors than asked, members of the public make up the rest (``crowd``), and the step's
  summary says how many are named and how many drawn, from which groups.
- Personas: see ``personas``; written in camel-oasis's own formats (twitter_profiles.csv
  with the columns its Twitter loaders read, reddit_profiles.json with those of its Reddit
  loaders).
- Time: rounds (capped), simulated minutes per round, start hour and the activity profile by
  hour from ``[simulation]`` (a timezone profile, not one country's clock).
- Events: narrative, hot topics, initial posts and scheduled posts assigned to agents, from one
  LLM call; rule-based defaults when the answer is unusable.
- Per agent: activity, active hours, posts per hour and response delay from the persona;
  influence from graph degree; stance from the persona.
- Language: personas, the narrative and the posts are asked for in the simulation's language
  (``SimSpec.language``), which the config carries to the run, whose agents write in it.
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import random
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from engine import language
from engine.config import SimulationSection
from engine.i18n import _
from engine.jobs import JobError
from engine.llm import InvalidAnswer
from engine.llm.content_checks import ContentChecks
from engine.sim.environment import crowd, personas as persona_gen, sizing
from engine.sim.environment.models import (
    CONFIG_FILE,
    REDDIT_PROFILES,
    TWITTER_PROFILES,
    AgentConfig,
    EventConfig,
    InitialPost,
    PlatformConfig,
    ScheduledEvent,
    SimulationConfig,
    TimeConfig,
)
from engine.sim.graph.store import EntityRecord, normalise_name
from engine.sim.ontology import Ontology, is_organization
from engine.words import plural

if TYPE_CHECKING:
    from engine.sim.context import SimContext


class PlannedPost(BaseModel):
    agent_name: str
    content: str
    hour: int  # simulated hours after the start; 0 = posted before the first round


class EventPlan(BaseModel):
    narrative: str
    hot_topics: list[str]
    initial_posts: list[PlannedPost]
    scheduled_events: list[PlannedPost]


EVENTS_SYSTEM = """You plan the events of a social-media simulation.
Return: narrative (one paragraph: what is being simulated and why it matters), hot_topics (3-6
short hashtags or phrases), initial_posts (2-5 posts that start the discussion at hour 0, each
by one of the listed agents, in their voice, under 280 characters), scheduled_events (0-4 later
developments, each a post by a listed agent at a given hour within the simulated span).
Use only agent names from the list, spelled exactly."""


# Agent names are matched (and unknown ones dropped) by ``plan_to_events``; the texts must be real.
EVENT_CHECKS = ContentChecks(texts=("narrative", "hot_topics[]", "initial_posts[].content",
                                    "scheduled_events[].content"))


def select_agents(entities: list[EntityRecord], ontology: Ontology, wanted: int) -> list[EntityRecord]:
    """The entities that become agents: speakable types only, most connected first."""
    speakable = set(ontology.type_names)
    ranked = [e for e in entities if e.type in speakable]  # ``entities`` is sorted by degree already
    return ranked[:wanted]


def usernames(names: list[str]) -> list[str]:
    out, seen = [], set()
    for name in names:
        base = re.sub(r"[^a-z0-9_]", "", normalise_name(name).replace(" ", "_"))[:24] or "agent"
        candidate, n = base, 2
        while candidate in seen:
            candidate, n = f"{base}{n}", n + 1
        seen.add(candidate)
        out.append(candidate)
    return out


def time_config(cfg: SimulationSection, rounds: int) -> TimeConfig:
    """The simulated clock of ``rounds`` rounds (already resolved by ``sizing``)."""
    return TimeConfig(total_hours=max(1, math.ceil(rounds * cfg.minutes_per_round / 60)),
                      minutes_per_round=cfg.minutes_per_round, rounds=rounds, start_hour=cfg.start_hour,
                      activity_by_hour=list(cfg.activity_by_hour))


def active_hours(profile: list[float]) -> list[int]:
    """Hours whose activity is at least half the mean: the default waking, posting hours."""
    mean = sum(profile) / len(profile)
    return [h for h, v in enumerate(profile) if v >= mean * 0.5] or list(range(24))


def influence(entity: EntityRecord, max_degree: int) -> float:
    base = 1.0 + 4.0 * entity.degree / max(max_degree, 1)
    return round(base * (1.5 if is_organization(entity.type) else 1.0), 2)


def default_events(ctx: "SimContext", agents: list[AgentConfig], entities: list[EntityRecord],
                   time: TimeConfig, ontology: Ontology) -> EventConfig:
    topics = [e.name for e in entities[:3]]
    summaries = {i: e.summary for i, e in enumerate(entities)}   # the named actors' (members of the public: none)
    posts = [InitialPost(agent_id=a.agent_id, round=0,
                         content=f"{(summaries.get(a.agent_id) or a.name)[:200]} What happens next: "
                                 f"{ctx.spec.requirement[:60]}")
             for a in agents[:3]]
    return EventConfig(hot_topics=topics, narrative=ontology.summary or ctx.spec.requirement,
                       initial_posts=posts, scheduled_events=[])


def plan_to_events(plan: EventPlan, agents: list[AgentConfig], time: TimeConfig) -> EventConfig | None:
    """Turn the LLM's plan into events bound to agent ids; None when nothing usable is left."""
    by_name = {normalise_name(a.name): a.agent_id for a in agents}
    initial, scheduled = [], []
    for p in plan.initial_posts:
        agent = by_name.get(normalise_name(p.agent_name))
        if agent is not None and p.content.strip():
            initial.append(InitialPost(agent_id=agent, content=p.content.strip()[:1000], round=0))
    for p in plan.scheduled_events:
        agent = by_name.get(normalise_name(p.agent_name))
        rnd = max(1, p.hour * 60 // time.minutes_per_round)
        if agent is not None and p.content.strip() and rnd < time.rounds:
            scheduled.append(ScheduledEvent(round=rnd, agent_id=agent, content=p.content.strip()[:1000]))
    topics = [t.strip()[:60] for t in plan.hot_topics if t.strip()][:8]
    if not initial:
        return None
    return EventConfig(hot_topics=topics, narrative=plan.narrative.strip()[:2000], initial_posts=initial,
                       scheduled_events=scheduled)


async def plan_events(ctx: "SimContext", agents: list[AgentConfig], entities: list[EntityRecord],
                      time: TimeConfig, ontology: Ontology) -> tuple[EventConfig, bool]:
    roster = "\n".join(f"- {a.name} [{a.entity_type}, {a.stance}]" for a in agents[:40])
    name = language.named(ctx.spec.language)
    messages = [{"role": "system", "content": f"{EVENTS_SYSTEM}\nWrite the narrative, hot topics and posts in {name}."},
                {"role": "user", "content": f"Simulated question: {ctx.spec.requirement}\n"
                                            f"Background: {ontology.summary}\n"
                                            f"Simulated span: {time.total_hours} hours.\nAgents:\n{roster}"}]
    try:
        plan = await ctx.llm.structured(EventPlan, messages, job=ctx.job_id, scope=ctx.scope, checks=EVENT_CHECKS)
        events = plan_to_events(plan, agents, time)
    except InvalidAnswer:
        events = None
    if events is None:
        return default_events(ctx, agents, entities, time, ontology), False
    return events, True


def write_profiles(ctx: "SimContext", agents: list[AgentConfig], people: list[persona_gen.Persona]) -> None:
    """camel-oasis profile files: row / list index = agent_id."""
    with ctx.path(TWITTER_PROFILES).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["user_id", "name", "username", "description", "user_char",
                         "following_agentid_list", "previous_tweets"])
        for a, p in zip(agents, people):
            writer.writerow([a.agent_id, a.name, a.username, p.bio, p.persona, "[]", "[]"])
    reddit = [{"realname": a.name, "username": a.username, "bio": p.bio, "persona": p.persona, "age": p.age,
               "gender": p.gender, "mbti": p.mbti, "country": p.country, "profession": p.profession,
               "interested_topics": p.interests} for a, p in zip(agents, people)]
    ctx.path(REDDIT_PROFILES).write_text(json.dumps(reddit, ensure_ascii=False, indent=1), encoding="utf-8")


async def step(ctx: "SimContext") -> dict:
    cfg = ctx.config.simulation
    ontology = Ontology.model_validate_json(ctx.path("ontology.json").read_text(encoding="utf-8"))
    assert ctx.graph is not None  # the pipeline hands every step the graph store
    entities = await ctx.graph.entities(ctx.sim_id)
    sizes = sizing.resolve(cfg, ctx.spec.agents, ctx.spec.rounds)
    wanted = sizes.agents
    chosen = select_agents(entities, ontology, wanted)
    if not chosen:
        raise JobError(_("the documents name no actors who could take part in a simulation "
                         "(no people or organizations were found)"))
    seed = cfg.seed if cfg.seed is not None else int(hashlib.sha256(ctx.sim_id.encode()).hexdigest()[:8], 16)
    rng = random.Random(seed)
    time = time_config(cfg, sizes.rounds)
    hours = active_hours(time.activity_by_hour)
    await ctx.progress(0.05, _("{actors} chosen from {entities}", actors=plural(len(chosen), "{n} actor", "{n} actors"),
                               entities=plural(len(entities), "{n} entity", "{n} entities")))
    people = await persona_gen.generate(ctx, chosen, hours, rng)
    groups: list[str] = []
    public: list = []
    if len(chosen) < wanted:
        places = Counter(p.country for p in people if p.country.strip().lower() not in ("", "unknown"))
        await ctx.progress(0.8, _("{actors} named in the documents; drawing {members} of the public",
                                  actors=plural(len(chosen), "{n} actor", "{n} actors"),
                                  members=plural(wanted - len(chosen), "{n} member", "{n} members")))
        groups, public = await crowd.generate_crowd(ctx, ontology, wanted - len(chosen), [e.name for e in chosen],
                                                    hours, rng, places.most_common(1)[0][0] if places else "unknown")
    ctx.path("personas.json").write_text(persona_gen.as_json(people + public), encoding="utf-8")

    max_degree = max((e.degree for e in chosen), default=0)
    names = usernames([e.name for e in chosen] + [p.entity_name for p in public])
    agents = [AgentConfig(agent_id=i, name=e.name, username=names[i], entity_type=e.type, entity_id=str(e.id),
                          activity_level=p.activity_level, active_hours=p.active_hours,
                          posts_per_hour=p.posts_per_hour, response_delay_rounds=p.response_delay_rounds,
                          influence=influence(e, max_degree), stance=p.stance, platforms=["twitter", "reddit"])
              for i, (e, p) in enumerate(zip(chosen, people))]
    agents += [AgentConfig(agent_id=i, name=p.entity_name, username=names[i], entity_type=group,
                           activity_level=p.activity_level, active_hours=p.active_hours,
                           posts_per_hour=p.posts_per_hour, response_delay_rounds=p.response_delay_rounds,
                           influence=crowd.influence(p), stance=p.stance, platforms=["twitter", "reddit"])
               for i, (group, p) in enumerate(zip(groups, public), start=len(chosen))]
    await ctx.progress(0.85, _("planning events"))
    events, planned = await plan_events(ctx, agents, chosen, time, ontology)
    feed = max(3, min(10, len(agents) // 4))
    config = SimulationConfig(
        sim_id=ctx.sim_id, requirement=ctx.spec.requirement, language=ctx.spec.language, time=time, agents=agents,
        events=events,
        twitter=PlatformConfig(enabled=True, recsys="random", refresh_rec_post_count=feed,
                               max_rec_post_len=feed, following_post_count=3, allow_self_rating=False,
                               show_score=False),
        reddit=PlatformConfig(enabled=True, recsys="reddit", refresh_rec_post_count=feed,
                              max_rec_post_len=feed, following_post_count=3, allow_self_rating=False,
                              show_score=True),
        seed=seed)
    write_profiles(ctx, agents, people + public)
    ctx.path(CONFIG_FILE).write_text(config.model_dump_json(indent=2), encoding="utf-8")
    summary: dict[str, Any] = {"agents": len(agents), "named": len(chosen), "drawn": len(public), "rounds": time.rounds,
               "llm_personas": sum(p.from_llm for p in people + public),
               "initial_posts": len(events.initial_posts), "scheduled_events": len(events.scheduled_events),
               "events_from_llm": planned}
    if public:
        summary["drawn from"] = ", ".join(f"{crowd.group_label(g)} {n}" for g, n in Counter(groups).most_common())
    return summary
