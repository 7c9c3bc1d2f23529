"""A simulation's agents as ``/sim agents`` lists them: who each is, on which platforms, and where
it stands now.

Read from what step 3 wrote (``simulation_config.json``: name, handle, the entity type it speaks
for, the stance its persona starts from, its platforms; ``reddit_profiles.json``: its bio, one row
per agent id) and from the stances tracked per round (engine.sim.stance.history): each agent's
latest classified stance on each platform, with its round and score. A simulation whose step 3
has not run has no agents yet (None).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.db import Database
from engine.offload import run_cpu
from engine.sim.environment.models import CONFIG_FILE, REDDIT_PROFILES, SimulationConfig
from engine.sim.stance.history import load_beliefs


@dataclass(frozen=True)
class Latest:
    round: int          # 1-based, the last round the agent was classified in on that platform
    label: str          # for, neutral, against
    score: float


@dataclass
class Agent:
    agent_id: int
    name: str
    username: str
    entity_type: str
    bio: str
    platforms: list[str]
    starting_stance: str                 # from its persona: supportive, opposing, neutral, observer
    latest: dict[str, Latest] = field(default_factory=dict)   # platform -> its latest stance there


def _read(folder: Path) -> list[Agent] | None:
    config_path = folder / CONFIG_FILE
    if not config_path.exists():
        return None
    config = SimulationConfig.model_validate_json(config_path.read_text(encoding="utf-8"))
    profiles_path = folder / REDDIT_PROFILES
    profiles = json.loads(profiles_path.read_text(encoding="utf-8")) if profiles_path.exists() else []
    return [Agent(a.agent_id, a.name, a.username, a.entity_type,
                  str(profiles[a.agent_id].get("bio", "")) if a.agent_id < len(profiles) else "",
                  list(a.platforms), a.stance) for a in config.agents]


async def roster(db: Database, sim_id: str, folder: Path) -> list[Agent] | None:
    """The simulation's agents in id order, with their latest stances; None before step 3."""
    agents = await run_cpu(_read, folder)
    if agents is None:
        return None
    beliefs = await load_beliefs(db, sim_id)
    by_id = {a.agent_id: a for a in agents}
    for (platform, round_no), stances in sorted(beliefs.rows.items(), key=lambda kv: kv[0][1]):
        for agent_id, stance in stances.items():
            if agent_id in by_id:
                by_id[agent_id].latest[platform] = Latest(round_no, stance.label, stance.score)
    return agents
