"""Who acts when: the activity schedule, scheduled posts and the seeded follow graph.

Pure functions of the SimulationConfig, the round number and the rounds injected events went
out in (kept in the run's log), so a resumed run makes the same choices as the original one
would have (every draw comes from a generator seeded by ``(seed, platform, round)``).

An agent's response delay holds it back for that many rounds after each piece of news (an
initial or scheduled post, an injected event), as the design's "delay before reacting to a hot
event" says, not only after the first post of the run.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from engine import language
from engine.sim.environment.models import AgentConfig, SimulationConfig


@dataclass(frozen=True)
class ScheduledPost:
    agent_id: int
    content: str
    kind: str  # 'initial_post' or 'event'


def on_platform(agent: AgentConfig, platform: str) -> bool:
    return platform in agent.platforms


def _rng(cfg: SimulationConfig, platform: str, round_no: int, salt: str) -> random.Random:
    return random.Random(f"{cfg.seed}:{platform}:{round_no}:{salt}")


def first_content_round(cfg: SimulationConfig) -> int:
    """The round in which the first scheduled post appears (agents react from there on)."""
    rounds = [p.round for p in cfg.events.initial_posts] + [e.round for e in cfg.events.scheduled_events]
    return min(rounds) if rounds else 0


def news_rounds(cfg: SimulationConfig, platform: str, injected: tuple[int, ...] = ()) -> set[int]:
    """The rounds in which news reaches ``platform``: its initial and scheduled posts, and the
    rounds (from 0) in which injected events went out on it."""
    return ({p.round for p in cfg.events.initial_posts if p.platform in (platform, "both")}
            | {e.round for e in cfg.events.scheduled_events if e.platform in (platform, "both")}
            | set(injected))


def held_back(agent: AgentConfig, round_no: int, news: set[int]) -> bool:
    """Whether the agent is still waiting out its response delay after a piece of news."""
    return any(e <= round_no < e + agent.response_delay_rounds for e in news)


def active_steps(cfg: SimulationConfig, platform: str, round_no: int, max_steps: int,
                 injected: tuple[int, ...] = ()) -> dict[int, int]:
    """agent_id -> number of LLM steps (>= 1) for every agent the schedule makes active this round.

    An agent is active when the simulated hour is one of its active hours, it is not waiting out
    its response delay (counted from the first post, and again from each new post of the news:
    an initial or scheduled post, or an event injected in one of the rounds ``injected``), and a
    draw falls under ``activity_level x activity_by_hour[hour]``. An active agent takes
    ``posts_per_hour`` scaled to the round length (rounded stochastically, at least one, at most
    ``max_steps``) steps.
    """
    hour = cfg.time.hour_of_round(round_no)
    rng = _rng(cfg, platform, round_no, "active")
    start = first_content_round(cfg)
    news = news_rounds(cfg, platform, injected)
    steps: dict[int, int] = {}
    for agent in cfg.agents:
        draw = rng.random()  # always drawn, so one agent's settings never shift another's draws
        frac_draw = rng.random()
        if not on_platform(agent, platform) or hour not in agent.active_hours:
            continue
        if round_no < start + agent.response_delay_rounds or held_back(agent, round_no, news):
            continue
        if draw >= activity_chance(agent.activity_level, cfg.time.activity_by_hour[hour]):
            continue
        steps[agent.agent_id] = steps_when_active(agent.posts_per_hour, cfg.time.minutes_per_round,
                                                  max_steps, frac_draw)
    return steps


def activity_chance(activity_level: float, hour_multiplier: float) -> float:
    """The chance that an agent acts in a round of an hour it is awake in."""
    return min(1.0, activity_level * hour_multiplier)


def steps_when_active(posts_per_hour: float, minutes_per_round: int, max_steps: int, draw: float) -> int:
    """LLM steps of an active agent in one round: ``posts_per_hour`` scaled to the round,
    rounded up when ``draw`` (uniform in 0..1) falls under the fraction, between 1 and ``max_steps``."""
    expected = posts_per_hour * minutes_per_round / 60
    n = math.floor(expected) + (1 if draw < expected - math.floor(expected) else 0)
    return max(1, min(max_steps, n))


def expected_steps_when_active(posts_per_hour: float, minutes_per_round: int, max_steps: int) -> float:
    """The mean of ``steps_when_active`` over its draw (what an estimate counts on)."""
    expected = posts_per_hour * minutes_per_round / 60
    frac = expected - math.floor(expected)
    return ((1 - frac) * steps_when_active(posts_per_hour, minutes_per_round, max_steps, 1.0)
            + frac * steps_when_active(posts_per_hour, minutes_per_round, max_steps, 0.0))


def scheduled_posts(cfg: SimulationConfig, platform: str, round_no: int) -> list[ScheduledPost]:
    """Initial posts and injected events that go out on ``platform`` in ``round_no``."""
    known = {a.agent_id: a for a in cfg.agents}
    out = [ScheduledPost(p.agent_id, p.content, "initial_post") for p in cfg.events.initial_posts
           if p.round == round_no and p.platform in (platform, "both")]
    out += [ScheduledPost(e.agent_id, e.content, "event") for e in cfg.events.scheduled_events
            if e.round == round_no and e.platform in (platform, "both")]
    return [p for p in out if p.agent_id in known]


# An agent follows about ``follow_density x (agents - 1)`` others at the start, but at most about this
# many: in a crowd of a thousand, a fifth of everyone would be two hundred accounts each.
MAX_FOLLOWEES = 20


def follow_edges(cfg: SimulationConfig, platform: str, density: float) -> list[tuple[int, int]]:
    """Seed follower -> followee edges: an agent with more influence gets more followers.

    Each ordered pair of agents on the platform becomes an edge with probability
    ``density x influence(followee) / mean influence`` (capped at 1), the density lowered so that
    an agent follows ``MAX_FOLLOWEES`` others on average at most.
    """
    members = [a for a in cfg.agents if on_platform(a, platform)]
    if len(members) < 2:
        return []
    density = min(density, MAX_FOLLOWEES / (len(members) - 1))
    mean = sum(a.influence for a in members) / len(members) or 1.0
    rng = _rng(cfg, platform, -1, "follow")
    edges = []
    for follower in members:
        for followee in members:
            if follower.agent_id == followee.agent_id:
                continue
            if rng.random() < min(1.0, density * followee.influence / mean):
                edges.append((follower.agent_id, followee.agent_id))
    return edges


def language_note(cfg: SimulationConfig) -> str:
    """The line added to every agent's profile so it writes in the simulation's language."""
    name = language.named(cfg.language)
    return f" Write every post, comment and answer in {name}."


def stance_note(cfg: SimulationConfig, agent: AgentConfig) -> str:
    """The line added to an agent's profile so its stance on the simulated topic steers it."""
    topic = ", ".join(cfg.events.hot_topics) or cfg.requirement
    note = f" On {topic} your stance is {agent.stance}."
    if cfg.events.narrative:
        note += f" Context: {cfg.events.narrative}"
    return note
