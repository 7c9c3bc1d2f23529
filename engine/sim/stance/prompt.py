"""The stance classification request: its answer schema, its prompt and the persona prior.

One request classifies a batch of agents of one platform and round. Each agent is shown with
its persona's stance (the prior), its score after the previous round if it has one, and what it
did in the round: its posts, comments and quotes in its own words, and the content of what it
liked, disliked or reposted. The model answers one score in [-1, 1] per agent id; scores outside
the range are clamped, ids that were not asked are dropped (see ``engine.sim.stance.tracking``).
"""
from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from engine.llm.content_checks import ContentChecks

# An agent's persona stance (engine.sim.environment.models.Stance) as a score before it has acted.
PRIOR = {"supportive": 0.5, "opposing": -0.5, "neutral": 0.0, "observer": 0.0}
DEED_CHARS = 200        # one thing an agent did, as the prompt quotes it
DEEDS_PER_AGENT = 6     # what one agent did in a round, at most, in the prompt

SYSTEM = """You rate the stance of social-media users in a simulation towards the subject of a \
question. The question: {requirement}
For each user give a score from -1 (firmly against the subject: the proposal, decision, actor or \
event at its centre) through 0 (neutral, undecided or off-topic) to +1 (firmly for it), judged from \
what the user did this round: their own posts, comments and quotes count most; what they liked or \
reposted counts as agreement and what they disliked as disagreement. The persona stance and the \
previous score are a prior: keep close to them unless this round's actions say otherwise.
Answer every user id listed, once."""


class AgentStance(BaseModel):
    agent_id: int
    score: float


class StanceBatch(BaseModel):
    stances: list[AgentStance]


CHECKS = ContentChecks(items=("stances",))


@dataclass
class AgentRound:
    """One agent's round as the prompt shows it."""
    agent_id: int
    name: str
    persona_stance: str
    previous: float | None
    deeds: list[str]


def describe(agent: AgentRound) -> str:
    before = f"; previous score {agent.previous:+.2f}" if agent.previous is not None else ""
    lines = [f"User {agent.agent_id} (@{agent.name}), persona stance: {agent.persona_stance}{before}"]
    lines += [f"- {d}" for d in agent.deeds[:DEEDS_PER_AGENT]]
    return "\n".join(lines)


def messages(requirement: str, platform: str, round_no: int, agents: list[AgentRound]) -> list[dict]:
    listing = "\n\n".join(describe(a) for a in agents)
    return [{"role": "system", "content": SYSTEM.format(requirement=requirement.strip())},
            {"role": "user", "content": f"Round {round_no} on {platform}. The users and what they did:\n\n{listing}"}]


def clip(text: str) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= DEED_CHARS else text[:DEED_CHARS - 1] + "…"
