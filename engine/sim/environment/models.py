"""The prepared environment of a simulation: what step 3 writes and step 4 reads.

Written as ``simulation_config.json`` in the simulation folder, beside the camel-oasis
profile files (``twitter_profiles.csv``: username, description, user_char;
``reddit_profiles.json``: username, bio, persona, age, gender, mbti, country).
Every value here is consumed by the run step; nothing is generated for show.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

Platform = Literal["twitter", "reddit"]
BOTH_PLATFORMS: tuple[Platform, ...] = ("twitter", "reddit")
Stance = Literal["supportive", "opposing", "neutral", "observer"]


class TimeConfig(BaseModel):
    total_hours: int = Field(24, ge=1)
    minutes_per_round: int = Field(60, ge=1)
    rounds: int = Field(24, ge=1)              # already capped by config
    start_hour: int = Field(8, ge=0, le=23)    # simulated clock at round 0
    # 24 multipliers: how active people are at each simulated hour (timezone profile)
    activity_by_hour: list[float] = Field(default_factory=lambda: [1.0] * 24, min_length=24, max_length=24)

    def hour_of_round(self, round_no: int) -> int:
        return (self.start_hour + (round_no * self.minutes_per_round) // 60) % 24

    def round_start(self, round_no: int) -> datetime:
        """The simulated clock when round ``round_no`` (from 0) begins; naive, as oasis stamps it."""
        return datetime(2025, 1, 1, self.start_hour) + timedelta(minutes=round_no * self.minutes_per_round)


class AgentConfig(BaseModel):
    agent_id: int                              # row index in both profile files
    name: str
    username: str
    entity_type: str
    entity_id: str = ""                        # graph node this agent speaks for
    activity_level: float = Field(0.5, ge=0.0, le=1.0)
    active_hours: list[int] = Field(default_factory=lambda: list(range(8, 23)))
    posts_per_hour: float = Field(1.0, ge=0.0)
    response_delay_rounds: int = Field(0, ge=0)  # rounds to wait before reacting to new posts
    influence: float = Field(1.0, ge=0.0)        # weight of this agent's posts (followers, rec)
    stance: Stance = "neutral"
    platforms: list[Platform] = Field(default_factory=lambda: list(BOTH_PLATFORMS))


class InitialPost(BaseModel):
    agent_id: int
    content: str
    round: int = Field(0, ge=0)
    platform: Literal["twitter", "reddit", "both"] = "both"


class ScheduledEvent(BaseModel):
    round: int = Field(ge=0)
    content: str                               # injected as a post by ``agent_id``
    agent_id: int
    platform: Literal["twitter", "reddit", "both"] = "both"


class EventConfig(BaseModel):
    hot_topics: list[str] = Field(default_factory=list)
    narrative: str = ""                        # one paragraph: what the simulation is about
    initial_posts: list[InitialPost] = Field(default_factory=list)
    scheduled_events: list[ScheduledEvent] = Field(default_factory=list)


class PlatformConfig(BaseModel):
    enabled: bool = True
    recsys: str = "random"                     # offline-safe recommender
    refresh_rec_post_count: int = Field(5, ge=1)
    max_rec_post_len: int = Field(5, ge=1)
    following_post_count: int = Field(3, ge=0)
    comments_per_post: int = Field(5, ge=1)   # a feed post shows its newest comments only (oasis_setup)
    allow_self_rating: bool = False
    show_score: bool = True                    # reddit: show net score instead of likes/dislikes


class SimulationConfig(BaseModel):
    sim_id: str
    requirement: str
    language: str = "en"                       # what the agents write in (engine.language; SimSpec.language)
    time: TimeConfig = TimeConfig()
    agents: list[AgentConfig]
    events: EventConfig = EventConfig()
    twitter: PlatformConfig = PlatformConfig()
    reddit: PlatformConfig = PlatformConfig(recsys="reddit")
    seed: int = 0                              # drives every random choice of the run


CONFIG_FILE = "simulation_config.json"
TWITTER_PROFILES = "twitter_profiles.csv"
REDDIT_PROFILES = "reddit_profiles.json"
