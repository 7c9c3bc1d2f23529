"""The report agent's tools, offered to the LLM as JSON-schema functions (native tool calling).

Each tool's arguments are a pydantic model: its JSON schema is what the LLM sees, and the
LLM's arguments are validated against it. Bad arguments (broken JSON, wrong types, unknown
tool) come back to the LLM as an error result it can correct; they never end the report.
Every citation a tool hands out ([fact N], [twitter post N], [agent @name]) is remembered with
what it stands for, so the report can list its sources and flag citations no tool returned.
The report of an ensemble is written from its median-most run with one more tool,
``ensemble_runs``, that sees every run (engine.sim.ensemble.report; posts cited [run 3 twitter post 12]).
Searches run off the event loop: the graph's through ``GraphStore``, the simulation's posts
through ``PostSearch`` (the memory engine's recall over the simulation's scope, post_search).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from engine import language
from engine.i18n import _
from engine.jobs import JobError
from engine.llm import BudgetExceeded, LLMError
from engine.llm.content_checks import ContentChecks
from engine.sim.report.post_search import PostSearch
from engine.sim.report.sources import AgentProfile, Fact, GraphSearch, Interviewer, keyword_score, terms
from engine.sim.report.stats import SimStats
from engine.words import in_english, plural

log = logging.getLogger(__name__)


class InsightForgeArgs(BaseModel):
    """Deep search for one question: splits it into sub-queries, searches the knowledge graph and
    the simulation's posts for each, and gathers the entities involved and chains of relations
    between them. Use it first for every section."""
    question: str = Field(description="the question this part of the report must answer")


class PanoramaSearchArgs(BaseModel):
    """Every fact of the knowledge graph, including superseded and historical ones, each marked
    current or superseded, the most relevant to the topic as far as the result holds, oldest
    first, with how many facts are current and superseded in all: use it to tell how a
    situation changed over time."""
    query: str = Field(description="topic to survey")


class QuickSearchArgs(BaseModel):
    """Fast lookup of current facts matching a query: use it to check one detail."""
    query: str = Field(description="what to look up")
    limit: int = Field(5, ge=1, le=20, description="maximum facts")


class InterviewAgentsArgs(BaseModel):
    """Ask simulated agents a question and get their answers to quote. Name agents by username,
    or leave the list empty: then the agents best placed to answer are chosen, each with the
    reason why and a question written for them."""
    question: str = Field(description="the question to ask, addressed to the agents")
    agents: list[str] = Field(default_factory=list, description="usernames to ask; empty chooses")
    count: int = Field(3, ge=1, le=10, description="how many agents to ask when choosing")
    platform: Literal["twitter", "reddit", "both"] = Field("both", description="where the agents are asked")


class SimulationStatisticsArgs(BaseModel):
    """Figures of the simulation run: actions by round and platform, action mix, the most engaged
    posts and agents, and who interacted with whom."""
    focus: Literal["overview", "rounds", "posts", "agents", "interactions"] = Field(
        "overview", description="which figures to return")
    top: int = Field(5, ge=1, le=20, description="how many posts, agents or interactions")


class EnsembleRunsArgs(BaseModel):
    """The other runs of this ensemble (the same simulation run several times with different seeds):
    how each ended, the round where they part, their most engaged posts to cite. run 0: every run
    at a glance; run K: that run's belief split per round and its posts."""
    run: int = Field(0, ge=0, le=1000, description="0 for every run, or a run's number")
    top: int = Field(3, ge=1, le=10, description="posts per run")


class SubQueries(BaseModel):
    queries: list[str]


SUBQUERY_CHECKS = ContentChecks(texts=("queries[]",))


class InterviewPick(BaseModel):
    username: str
    reason: str
    question: str


class InterviewPlan(BaseModel):
    picks: list[InterviewPick]


PLAN_SYSTEM = """You choose whom to interview among the agents of a social-media simulation.
The user gives the question a report needs answered and the agents (username, type, stance,
what they did, persona). Pick at most {count} agents whose answers together answer it best:
different sides and the most involved first. For each: username exactly as listed, reason (one
sentence: why this agent), question (the interview question for this agent, in the second person,
drawing on what it did)."""
PLAN_ROSTER = 40            # agents shown to the LLM choosing interviewees (the most engaged first)
PLAN_PERSONA_CHARS = 160    # of each one's persona
PANORAMA_FRAME_CHARS = 120   # a panorama result's keys and counts around its facts


TOOLS: dict[str, type[BaseModel]] = {
    "insight_forge": InsightForgeArgs,
    "panorama_search": PanoramaSearchArgs,
    "quick_search": QuickSearchArgs,
    "interview_agents": InterviewAgentsArgs,
    "simulation_statistics": SimulationStatisticsArgs,
}


def _parameters(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def tool_schemas(tools: dict[str, type[BaseModel]] = TOOLS) -> list[dict[str, Any]]:
    """The ``tools=[...]`` list of a chat-completion request."""
    return [{"type": "function", "function": {
        "name": name, "description": " ".join((model.__doc__ or "").split()),
        "parameters": _parameters(model)}} for name, model in tools.items()]

def fitted(result: dict, limit: int) -> str:
    """``result`` as JSON of at most ``limit`` characters that is still JSON: the longest list
    gives up its last items first (``cut_items`` says how many), and only a result that still
    does not fit becomes its text's start inside ``{"cut": true, "text": ...}``. (A result cut at
    a character count is broken JSON: the writer cannot read it, and a model loses its end.)"""
    text = json.dumps(result, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    result = {k: list(v) if isinstance(v, list) else v for k, v in result.items()}
    dropped = 0
    while len(text) > limit:
        lists = [v for v in result.values() if isinstance(v, list) and v]
        if not lists:
            break
        max(lists, key=lambda v: len(json.dumps(v, ensure_ascii=False, default=str))).pop()
        dropped += 1
        result["cut_items"] = dropped
        text = json.dumps(result, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 40)]
    while len(json.dumps({"cut": True, "text": head}, ensure_ascii=False)) > limit:
        head = head[: len(head) - 50]
    return json.dumps({"cut": True, "text": head}, ensure_ascii=False)


@dataclass
class Pick:
    """An agent to interview, the question it is asked and why it was chosen ("" when named)."""
    agent: AgentProfile
    question: str
    reason: str = ""


@dataclass
class ToolCall:
    name: str
    arguments: str
    ok: bool
    result: str


class ReportTools:
    # name -> arguments model; each is a method of the same name. Report chat offers more.
    TOOLS: dict[str, type[BaseModel]] = TOOLS

    def __init__(self, stats: SimStats, graph: GraphSearch, interviewer: Interviewer,
                 roster: list[AgentProfile], llm, *, posts: PostSearch, job: str | None = None,
                 scope: str | None = None, result_chars: int = 6000, ensemble=None, lang: str = language.DEFAULT):
        self.stats = stats
        self.lang = lang   # the simulation's: its posts and facts are in it, so are the searches
        self.ensemble = ensemble   # an ensemble's report: engine.sim.ensemble.report.Ensemble
        self.offered: dict[str, type[BaseModel]] = {
            **self.TOOLS, **({"ensemble_runs": EnsembleRunsArgs} if ensemble is not None else {})}
        self.graph = graph
        self.posts = posts
        self.interviewer = interviewer
        # Without profile files, the agents known to the databases can still be interviewed.
        self.roster = roster or [AgentProfile(a.agent_id, a.name, a.name) for a in stats.agents]
        self.llm = llm
        self.job, self.scope = job, scope
        self.result_chars = result_chars
        self.calls: list[ToolCall] = []
        self.sources: dict[str, str] = {}   # citation -> what it stands for
        self.quotes: list[dict[str, str]] = []

    def schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(self.offered)

    async def call(self, name: str, arguments: str | None) -> str:
        """Run one tool call of the LLM; always returns the text of the tool message."""
        ok, result = False, None
        model = self.offered.get(name)
        if model is None:
            result = {"error": f"unknown tool {name!r}; the tools are: {', '.join(self.offered)}"}
        else:
            try:
                data = json.loads(arguments or "{}")
                args = model.model_validate(data)
            except json.JSONDecodeError as err:
                result = {"error": f"the arguments are not valid JSON ({err.msg} at character {err.pos}); "
                                   "call the tool again with a JSON object"}
            except ValidationError as err:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                     for e in err.errors()[:5])
                result = {"error": f"invalid arguments for {name}: {problems}"}
            else:
                try:
                    result = await getattr(self, name)(args)
                    ok = "error" not in result
                except BudgetExceeded:
                    raise
                except (JobError, OSError, ValueError) as err:   # LLM and run failures included
                    log.warning("report tool %s failed: %s", name, err)
                    result = {"error": f"{name} failed: {err}"}
        text = fitted(result, self.result_chars)
        self.calls.append(ToolCall(name, arguments or "", ok, text))
        return text

    # -- helpers ------------------------------------------------------------------------

    # ``sources`` (citation -> what it stands for) is read in the report: written in the current language.

    def _cite_post(self, cite: str, author: str, content: str) -> None:
        self.sources[cite] = f"@{author}: {content[:200]}"
        self.sources.setdefault(f"[agent @{author}]", f"@{author}")

    def _facts(self, facts: list[Fact], with_status: bool = False) -> list[dict]:
        self.sources.update((f.cite(), f"{f.text} ({f.source} -{f.relation}-> {f.target}"
                             + ("" if f.current else _("; superseded since {date}", date=f.invalid_at)) + ")")
                            for f in facts)
        return [f.to_dict(with_status) for f in facts]

    async def _posts(self, query: str, limit: int) -> list[dict]:
        out = []
        for hit in await self.posts.search(query, limit):
            p = hit.post
            self._cite_post(p.cite(), p.author, p.content)
            found = {"cite": p.cite(), "author": f"@{hit.author}", "content": hit.text[:400],
                     "likes": p.likes, "comments": p.comments, "reposts": p.reposts, "round": p.round}
            if hit.kind == "comment":   # the words are a comment's; the citation is the post it answers
                found["comment_on"] = {"author": f"@{p.author}", "content": p.content[:200]}
                self.sources.setdefault(f"[agent @{hit.author}]", f"@{hit.author}")
            out.append(found)
        return out

    async def _split(self, question: str) -> list[str]:
        try:
            split = await self.llm.structured(SubQueries, [
                {"role": "system", "content": "Split the question into 2-4 short, self-contained search queries "
                                              "that together cover it (who, what happened, reactions, consequences). "
                                              f"Write them in {language.named(self.lang)}."},
                {"role": "user", "content": question}], fast=True, job=self.job, scope=self.scope,
                checks=SUBQUERY_CHECKS)
            queries = [q.strip() for q in split.queries if q.strip()][:4]
        except BudgetExceeded:
            raise
        except LLMError as err:
            log.info("sub-query split failed, searching the whole question: %s", err)
            queries = []
        return list(dict.fromkeys([question, *queries]))

    # -- the tools ----------------------------------------------------------------------

    async def insight_forge(self, args: InsightForgeArgs) -> dict:
        queries = await self._split(args.question)
        facts: dict[int, Fact] = {}
        entities: dict[int, Any] = {}
        posts: dict[str, dict] = {}
        for q in queries:
            for f in await self.graph.search_facts(q, limit=8):
                facts.setdefault(f.id, f)
            for e in await self.graph.search_entities(q, limit=3):
                entities.setdefault(e.id, e)
            for p in await self._posts(q, 4):
                posts.setdefault(p["cite"], p)
        chains = await self._chains(list(entities.values())[:4])
        return {
            "sub_queries": queries,
            "facts": self._facts(sorted(facts.values(), key=lambda f: -f.score)[:15]),
            "entities": [{"name": e.name, "type": e.type, "summary": e.summary[:300]} for e in entities.values()],
            "relation_chains": chains,
            "simulation_posts": list(posts.values())[:10],
        }

    async def _chains(self, entities: list) -> list[str]:
        """Paths of two relations through the graph from the entities found: A -r-> B -s-> C, or
        A -r-> B <-s- C when the second relation points back at B."""
        chains: list[str] = []
        for entity in entities:
            for first in await self.graph.facts_of(entity.name, limit=6):
                self._facts([first])
                chains.append(f"{first.source} -{first.relation}-> {first.target} {first.cite()}")
                other = first.target if first.source == entity.name else first.source
                for second in await self.graph.facts_of(other, limit=4):
                    if second.id != first.id and entity.name not in (second.source, second.target):
                        self._facts([second])
                        step = (f"-{second.relation}-> {second.target}" if second.source == other
                                else f"<-{second.relation}- {second.source}")
                        chains.append(f"{first.source} -{first.relation}-> {first.target} {step} "
                                      f"{first.cite()}{second.cite()}")
        return list(dict.fromkeys(chains))[:12]

    async def panorama_search(self, args: PanoramaSearchArgs) -> dict:
        """Every fact of the graph, as the design's panorama: all are ranked and counted; the most
        relevant are shown whole as far as ``result_chars`` holds them (never cut mid-fact)."""
        facts = await self.graph.ranked_facts(args.query)
        room = self.result_chars - PANORAMA_FRAME_CHARS
        shown: list[Fact] = []
        for f in facts:
            room -= len(json.dumps(f.to_dict(with_status=True), ensure_ascii=False)) + 2
            if room < 0:
                break
            shown.append(f)
        shown.sort(key=lambda f: (f.valid_at or "", f.id))
        superseded = sum(1 for f in facts if not f.current)
        return {"facts": self._facts(shown, with_status=True), "current": len(facts) - superseded,
                "superseded": superseded, "shown": len(shown), "not_shown": len(facts) - len(shown)}

    async def quick_search(self, args: QuickSearchArgs) -> dict:
        facts = await self.graph.search_facts(args.query, limit=args.limit)
        return {"facts": self._facts(facts), "simulation_posts": await self._posts(args.query, 3)}

    async def _choose(self, args: InterviewAgentsArgs) -> tuple[list[Pick], list[str]]:
        """The agents to ask and each one's question: those the writer named (its question), else
        the LLM's choice with its reasons and questions (``_plan``), else by keyword relevance."""
        by_name = {a.username.lower(): a for a in self.roster} | {a.name.lower(): a for a in self.roster}
        if args.agents:
            chosen, unknown = [], []
            for name in args.agents:
                agent = by_name.get(name.strip().lstrip("@").lower())
                (chosen.append(agent) if agent else unknown.append(name))
            return [Pick(a, args.question) for a in {a.agent_id: a for a in chosen}.values()], unknown
        q = terms(args.question)
        engaged = {a.agent_id: i for i, a in enumerate(self.stats.agents)}

        def relevance(a: AgentProfile) -> tuple:
            text = f"{a.name} {a.username} {a.entity_type} {a.stance} {a.persona}"
            return (-keyword_score(q, text), engaged.get(a.agent_id, len(engaged)), a.agent_id)

        pool = [a for a in self.roster if args.platform == "both" or args.platform in a.platforms]
        planned = await self._plan(args, sorted(pool, key=lambda a: engaged.get(a.agent_id, len(engaged))))
        return planned or [Pick(a, args.question) for a in sorted(pool, key=relevance)[: args.count]], []

    async def _plan(self, args: InterviewAgentsArgs, pool: list[AgentProfile]) -> list[Pick]:
        """One call of the fast model: which agents of ``pool`` to ask, why, and what (empty when
        the answer is unusable, so the keyword choice stands in)."""
        shown = pool[:PLAN_ROSTER]
        if not shown:
            return []
        did = {a.agent_id: a.actions for a in self.stats.agents}
        roster = "\n".join(f"- @{a.username} ({a.entity_type or 'agent'}, {a.stance}, "
                            f"{in_english(did.get(a.agent_id, 0), '{n} action', '{n} actions')}): "
                            f"{a.persona[:PLAN_PERSONA_CHARS]}"
                            for a in shown)
        checks = ContentChecks(texts=("picks[].reason", "picks[].question"), names=("picks[].username",),
                               source=roster, items=("picks",))
        try:
            plan = await self.llm.structured(InterviewPlan, [
                {"role": "system", "content": PLAN_SYSTEM.format(count=args.count)},
                {"role": "user", "content": f"Question: {args.question}\n\nAgents:\n{roster}"}],
                fast=True, job=self.job, scope=self.scope, checks=checks)
        except BudgetExceeded:
            raise
        except LLMError as err:
            log.info("interviewees chosen by keywords: the choice failed (%s)", err)
            return []
        by_name = {a.username.lower(): a for a in shown}
        picks: dict[int, Pick] = {}
        for p in plan.picks:
            agent = by_name.get(p.username.strip().lstrip("@").lower())
            if agent is not None and agent.agent_id not in picks:
                picks[agent.agent_id] = Pick(agent, p.question.strip(), p.reason.strip())
        return list(picks.values())[: args.count]

    async def interview_agents(self, args: InterviewAgentsArgs) -> dict:
        picks, unknown = await self._choose(args)
        if not picks:
            return {"error": f"no such agents: {', '.join(unknown)}" if unknown else "no agents to ask",
                    "known_agents": [f"@{a.username}" for a in self.roster[:30]]}
        asked: dict[str, list[AgentProfile]] = {}   # one interview request per question
        for p in picks:
            asked.setdefault(p.question, []).append(p.agent)
        reasons = {p.agent.agent_id: p.reason for p in picks}
        out = []
        for question, agents in asked.items():
            for a in await self.interviewer.interview(agents, question, args.platform):
                cite = f"[agent @{a.username}]"
                self.sources[cite] = (
                    _("@{agent}, interviewed on {platform}", agent=a.username, platform=a.platform) if a.live
                    else _("@{agent} on {platform}, answered {label}", agent=a.username, platform=a.platform,
                           label=a.label))
                self.quotes.append({"agent": a.username, "platform": a.platform, "question": a.question,
                                    "answer": a.answer, "label": a.label})
                found = {"agent": f"@{a.username}", "cite": cite, "platform": a.platform, "answer": a.answer}
                if question != args.question:
                    found["asked"] = question
                if reasons.get(a.agent_id):
                    found["why_chosen"] = reasons[a.agent_id]
                if not a.live:
                    found["answered"] = a.label   # the writer must not present it as the agent's own words
                out.append(found)
        result: dict[str, Any] = {"question": args.question, "answers": out}
        if unknown:
            result["unknown_agents"] = unknown
        return result

    async def ensemble_runs(self, args: EnsembleRunsArgs) -> dict:
        return self.ensemble.tool_result(args.run, args.top, self._cite_post)

    async def simulation_statistics(self, args: SimulationStatisticsArgs) -> dict:
        view = self.stats.to_dict(top=args.top)
        for p in view["top_posts"]:
            self._cite_post(p["cite"], p["author"], p["content"])
        for a in view["top_agents"]:
            self.sources.setdefault(a["cite"], f"@{a['name']}: " + _(
                "{actions}, {engagements} received", actions=plural(a["actions"], "{n} action", "{n} actions"),
                engagements=plural(a["engagement_received"], "{n} engagement", "{n} engagements")))
        keys = {"overview": ["platforms", "total_actions", "actions_by_round", "action_mix", "top_posts",
                             "top_agents"],
                "rounds": ["platforms", "total_actions", "actions_by_round"],
                "posts": ["top_posts"], "agents": ["top_agents"], "interactions": ["interactions"]}[args.focus]
        return {k: view[k] for k in keys}
