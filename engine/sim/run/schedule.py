"""Who acts when: the activity schedule, scheduled posts and the seeded follow graph.

Pure functions of the SimulationConfig and the round number, so a resumed run makes the same
choices as the original one would have (every draw comes from a generator seeded by
``(seed, platform, round)``).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from engine.sim.envmodels import AgentConfig, SimulationConfig


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


def active_steps(cfg: SimulationConfig, platform: str, round_no: int, max_steps: int) -> dict[int, int]:
    """agent_id -> number of LLM steps (>= 1) for every agent the schedule makes active this round.

    An agent is active when the simulated hour is one of its active hours, it has waited out its
    response delay after the first post, and a draw falls under
    ``activity_level x activity_by_hour[hour]``. An active agent takes ``posts_per_hour`` scaled
    to the round length (rounded stochastically, at least one, at most ``max_steps``) steps.
    """
    hour = cfg.time.hour_of_round(round_no)
    rng = _rng(cfg, platform, round_no, "active")
    start = first_content_round(cfg)
    steps: dict[int, int] = {}
    for agent in cfg.agents:
        draw = rng.random()  # always drawn, so one agent's settings never shift another's draws
        frac_draw = rng.random()
        if not on_platform(agent, platform) or hour not in agent.active_hours:
            continue
        if round_no < start + agent.response_delay_rounds:
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


def follow_edges(cfg: SimulationConfig, platform: str, density: float) -> list[tuple[int, int]]:
    """Seed follower -> followee edges: an agent with more influence gets more followers.

    Each ordered pair of agents on the platform becomes an edge with probability
    ``density x influence(followee) / mean influence`` (capped at 1).
    """
    members = [a for a in cfg.agents if on_platform(a, platform)]
    if len(members) < 2:
        return []
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


def stance_note(cfg: SimulationConfig, agent: AgentConfig) -> str:
    """The line added to an agent's profile so its stance on the simulated topic steers it."""
    topic = ", ".join(cfg.events.hot_topics) or cfg.requirement
    note = f" On {topic} your stance is {agent.stance}."
    if cfg.events.narrative:
        note += f" Context: {cfg.events.narrative}"
    return note
