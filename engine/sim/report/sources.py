"""What the report agent's tools search and ask, behind two small interfaces.

``GraphSearch``: facts (graph edges, with validity) and entities of one simulation's graph.
``Interviewer``: asks agents of the simulation a question and returns their answers.

``StoreGraph`` adapts the pipeline's ``GraphStore``. ``PersonaInterviewer`` answers in character
from an agent's profile and its own posts, for when the run's live environment is gone;
``RunInterviewer`` asks the live agents through the run's interview channel. An answer says
which it is (``Answer.live``): a role-played one is shown with ``PERSONA_LABEL`` wherever it
appears, never as the agent's own.
"""
from __future__ import annotations

import csv
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from engine import language
from engine.i18n import N_, _
from engine.sim.environment.models import CONFIG_FILE, REDDIT_PROFILES, TWITTER_PROFILES, SimulationConfig
from engine.sim.run.service import RunUnreachable

log = logging.getLogger(__name__)

PERSONA_LABEL = N_("in character from the persona; the live agent was not reachable")

_WORD = re.compile(r"[\w']+", re.UNICODE)
_STOP = set("""a an and are as at be by for from has have how in is it its of on or that the this to was
were what when where which who whom why will with would do does did about into than then there their
they them these those can could should may might been being over under after before not no""".split())


def terms(text: str) -> list[str]:
    return [w for w in _WORD.findall((text or "").lower()) if len(w) > 2 and w not in _STOP]


def keyword_score(query_terms: list[str], text: str) -> float:
    """Share of the query's terms found in ``text`` (prefix matches count: 'hike' ~ 'hikes')."""
    if not query_terms:
        return 0.0
    words = set(terms(text))
    hits = sum(1 for q in set(query_terms) if q in words or any(w.startswith(q[:5]) for w in words if len(q) > 4))
    return hits / len(set(query_terms)) if hits else 0.0


@dataclass
class Fact:
    id: int
    text: str
    source: str
    relation: str
    target: str
    valid_at: str | None = None
    invalid_at: str | None = None
    score: float = 0.0

    @property
    def current(self) -> bool:
        return self.invalid_at is None

    def cite(self) -> str:
        return f"[fact {self.id}]"

    def to_dict(self, with_status: bool = False) -> dict:
        out: dict[str, str | None] = {"cite": self.cite(), "fact": self.text,
                                      "chain": f"{self.source} -{self.relation}-> {self.target}"}
        if with_status:
            out["status"] = "current" if self.current else f"superseded (invalid since {self.invalid_at})"
            out["valid_at"] = self.valid_at
        return out


@dataclass
class Entity:
    id: int
    name: str
    type: str
    summary: str = ""
    score: float = 0.0


class GraphSearch(Protocol):
    async def search_facts(self, query: str, limit: int = 10, include_invalid: bool = False) -> list[Fact]: ...

    async def ranked_facts(self, query: str) -> list[Fact]: ...

    async def search_entities(self, query: str, limit: int = 5) -> list[Entity]: ...

    async def facts_of(self, name: str, limit: int = 10) -> list[Fact]: ...


class StoreGraph:
    """The simulation's local graph (``GraphStore``: semantic + keyword search) seen by the tools."""

    def __init__(self, store, sim_id: str):
        self.store = store
        self.sim_id = sim_id

    @staticmethod
    def _fact(f, score: float = 0.0) -> Fact:
        return Fact(f.id, f.fact, f.source, f.relation, f.target, f.valid_at, f.invalid_at or None, score)

    async def search_facts(self, query: str, limit: int = 10, include_invalid: bool = False) -> list[Fact]:
        # ask for more than needed: superseded facts are dropped afterwards when not wanted
        hits = await self.store.search(self.sim_id, query, k=limit * 3, kinds=("fact",))
        facts = [self._fact(h.fact, h.score) for h in hits]
        return [f for f in facts if include_invalid or f.current][:limit]

    async def ranked_facts(self, query: str) -> list[Fact]:
        """Every fact of the graph, current and superseded, the most relevant to ``query`` first
        (in the graph's order when the query is blank: the search ranks nothing then)."""
        facts = await self.store.facts(self.sim_id)
        if not query.strip():
            return [self._fact(f) for f in facts]
        hits = await self.store.search(self.sim_id, query, k=len(facts), kinds=("fact",))
        return [self._fact(h.fact, h.score) for h in hits]

    async def search_entities(self, query: str, limit: int = 5) -> list[Entity]:
        hits = await self.store.search(self.sim_id, query, k=limit, kinds=("entity",))
        return [Entity(h.entity.id, h.entity.name, h.entity.type, h.entity.summary, h.score) for h in hits]

    async def facts_of(self, name: str, limit: int = 10) -> list[Fact]:
        facts = [self._fact(f) for f in await self.store.neighbours(self.sim_id, name, depth=1)]
        return [f for f in facts if f.current][:limit]


# -- agents and interviews -------------------------------------------------------------------

@dataclass
class AgentProfile:
    agent_id: int
    name: str
    username: str
    entity_type: str = ""
    stance: str = "neutral"
    persona: str = ""
    platforms: list[str] = field(default_factory=lambda: ["twitter", "reddit"])

    def cite(self) -> str:
        return f"[agent @{self.username}]"


def load_roster(sim_dir: Path) -> list[AgentProfile]:
    """The agents of a prepared simulation, with personas from the oasis profile files."""
    sim_dir = Path(sim_dir)
    config_path = sim_dir / CONFIG_FILE
    if not config_path.exists():
        return []
    config = SimulationConfig.model_validate_json(config_path.read_text(encoding="utf-8"))
    personas: dict[int, str] = {}
    reddit = sim_dir / REDDIT_PROFILES
    if reddit.exists():
        for i, p in enumerate(json.loads(reddit.read_text(encoding="utf-8"))):
            personas[i] = " ".join(str(p.get(k) or "") for k in ("bio", "persona")).strip()
    twitter = sim_dir / TWITTER_PROFILES
    if twitter.exists():
        with twitter.open(encoding="utf-8", newline="") as fh:
            for i, row in enumerate(csv.DictReader(fh)):
                personas.setdefault(i, f"{row.get('description', '')} {row.get('user_char', '')}".strip())
    return [AgentProfile(a.agent_id, a.name, a.username, a.entity_type, a.stance,
                         personas.get(a.agent_id, ""), list(a.platforms)) for a in config.agents]


@dataclass
class Answer:
    agent_id: int
    username: str
    platform: str
    question: str
    answer: str
    live: bool = True   # False: role-played from the persona (PERSONA_LABEL)

    @property
    def label(self) -> str:
        return "" if self.live else _(PERSONA_LABEL)


class Interviewer(Protocol):
    async def interview(self, agents: list[AgentProfile], question: str, platform: str) -> list[Answer]: ...


class PersonaInterviewer:
    """Answers in character from the agent's persona and what it posted during the run.

    For a finished run whose oasis environment is closed; ``llm`` is the shared LLMClient; the
    answers are in ``lang``, the simulation's language, as its live agents' are."""

    def __init__(self, llm, sim_dir: Path, job: str | None = None, scope: str | None = None,
                 lang: str = language.DEFAULT):
        self.llm = llm
        self.sim_dir = Path(sim_dir)
        self.job, self.scope = job, scope
        self.lang = lang

    def _own_posts(self, agent_id: int, platform: str, limit: int = 5) -> list[str]:
        import sqlite3

        from engine.sim.run.output import platform_db
        path = platform_db(self.sim_dir, platform)
        if not path.exists():
            return []
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            rows = conn.execute("SELECT COALESCE(quote_content, content) FROM post WHERE user_id = ?"
                                " AND (original_post_id IS NULL OR quote_content IS NOT NULL)"
                                " ORDER BY post_id DESC LIMIT ?", (agent_id, limit)).fetchall()
            rows += conn.execute("SELECT content FROM comment WHERE user_id = ? ORDER BY comment_id DESC LIMIT ?",
                                 (agent_id, limit)).fetchall()
        finally:
            conn.close()
        return [r[0] for r in rows if r[0]]

    async def interview(self, agents: list[AgentProfile], question: str, platform: str) -> list[Answer]:
        from engine.offload import run_cpu

        answers = []
        for agent in agents:
            where = agent.platforms[0] if platform == "both" or platform not in agent.platforms else platform
            posts = await run_cpu(self._own_posts, agent.agent_id, where)
            said = "\n".join(f"- {p}" for p in posts) or "- (nothing)"
            text = await self.llm.chat([
                {"role": "system", "content": f"You are {agent.name} (@{agent.username}), a {agent.entity_type}"
                                              f" taking part in a social-media simulation on {where}. Persona: "
                                              f"{agent.persona}\nWhat you posted and commented:\n{said}\n"
                                              "Answer the interviewer in character, in at most 4 sentences. "
                                              f"{language.answer_in(self.lang)}"},
                {"role": "user", "content": question}], job=self.job, scope=self.scope, language=self.lang)
            answers.append(Answer(agent.agent_id, agent.username, where, question, text.strip(), live=False))
        return answers


class RunInterviewer:
    """Asks the agents themselves through the run service (camel-oasis INTERVIEW action, in the
    live environment or one reopened from the databases); the service records every answer.
    When the run cannot be reached (no run state, databases gone), ``fallback`` answers; any other
    failure (a budget reached, an agent not on the platform) is the tool's error to report."""

    def __init__(self, runs, sim_id: str, fallback: Interviewer | None = None):
        self.runs = runs
        self.sim_id = sim_id
        self.fallback = fallback

    async def interview(self, agents: list[AgentProfile], question: str, platform: str) -> list[Answer]:
        by_id = {a.agent_id: a for a in agents}
        try:
            answers = await self.runs.interview(self.sim_id, list(by_id), question,
                                                None if platform == "both" else [platform], asked_by="report")
        except RunUnreachable as err:
            if self.fallback is None:
                raise
            log.info("interviewing from personas: the run of %s cannot be reached (%s)", self.sim_id, err)
            return await self.fallback.interview(agents, question, platform)
        return [Answer(a.agent_id, by_id[a.agent_id].username, a.platform, question,
                       a.answer or f"(no answer: {a.error})") for a in answers if a.agent_id in by_id]
