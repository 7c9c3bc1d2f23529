"""A small prepared simulation folder, built straight from the environment models."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from engine.sim.envmodels import (CONFIG_FILE, REDDIT_PROFILES, TWITTER_PROFILES, AgentConfig, EventConfig,
                                  InitialPost, ScheduledEvent, SimulationConfig, TimeConfig)

NAMES = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana"]


def make_sim_folder(folder: Path, agents: int = 6, rounds: int = 3, sim_id: str = "s1",
                    everyone_everywhere: bool = False) -> SimulationConfig:
    """Everyone is active in every round, once; but agent 3 twice, agents 0 and 4 are on Twitter
    only and agent 1 posts an event on Reddit in round 1, unless ``everyone_everywhere`` (all
    agents on both platforms once a round, the initial post only)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [NAMES[i] if i < len(NAMES) else f"Agent{i}" for i in range(agents)]
    cfg = SimulationConfig(
        sim_id=sim_id, requirement="How will the town react to the new bridge toll?",
        time=TimeConfig(total_hours=rounds, minutes_per_round=60, rounds=rounds, start_hour=9),
        agents=[AgentConfig(agent_id=i, name=names[i], username=names[i].lower(), entity_type="Person",
                            activity_level=1.0, active_hours=list(range(24)),
                            posts_per_hour=2.0 if i == 3 and not everyone_everywhere else 1.0,
                            influence=1.0 + i % 3, stance=("supportive", "opposing", "neutral")[i % 3],
                            platforms=["twitter", "reddit"] if i % 4 or everyone_everywhere else ["twitter"])
                for i in range(agents)],
        events=EventConfig(hot_topics=["bridge toll"], narrative="The council announced a toll.",
                           initial_posts=[InitialPost(agent_id=0, content="The toll starts Monday.", round=0)],
                           scheduled_events=[] if everyone_everywhere else [
                               ScheduledEvent(round=1, agent_id=1, platform="reddit",
                                              content="BREAKING: council delays the toll")]),
        seed=7)
    (folder / CONFIG_FILE).write_text(cfg.model_dump_json(indent=1), encoding="utf-8")
    with open(folder / TWITTER_PROFILES, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["username", "description", "user_char"])
        w.writeheader()
        for a in cfg.agents:
            w.writerow({"username": a.username, "description": f"{a.name}, a local",
                        "user_char": f"{a.name} lives in town and commutes over the bridge."})
    reddit = [{"username": a.username, "bio": f"{a.name}, a local", "persona": f"{a.name} reads the local news.",
               "age": 30 + a.agent_id, "gender": "female" if a.agent_id % 2 else "male", "mbti": "INTJ",
               "country": "UK"} for a in cfg.agents]
    (folder / REDDIT_PROFILES).write_text(json.dumps(reddit), encoding="utf-8")
    return cfg
