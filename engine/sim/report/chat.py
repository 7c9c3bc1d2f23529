"""Report chat: a question about a simulation, answered by its report agent with its tools.

``ask_report`` answers one question (``/report <sim> ask <question>``, or a reply to the
report's messages in the chat) about a simulation whose report is written:

- the prompt holds the requirement, the run in figures, the report itself (``report.md``, cut to
  ``[report] chat_report_chars``) and the last ``[report] chat_history`` questions and answers
  about this simulation in the same channel (``chat_store``), as earlier turns of the chat;
- the model gathers evidence with the report agent's tools (graph search, statistics,
  interviews, posts) plus ``belief_series`` (the for / neutral / against split per round and
  platform, from table ``sim_stances`` read by ``engine.sim.beliefs``; "not tracked" when there
  is none), in at most
  ``[report] chat_max_tool_turns`` tool turns of the report agent's own loop (``loop``);
- the answer cites like the report ([fact 7], [twitter post 12], [agent @name]); a citation that
  no tool returned for this question and that the report does not list among its verified
  sources is flagged (``ReportAnswer.unverified``).

Every LLM call (the agent's turns, the query split, persona interviews) is counted against the
scope and against the job ``chat_job(sim_id)``: the questions about one simulation count as one
job, so ``[llm] job_budget_*`` caps them together and ``scope_budget_usd_per_day`` caps the day.
A cap reached raises ``BudgetExceeded`` before any request is sent. An endpoint that refuses
tool calling gets the question with the report alone.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from pydantic import BaseModel, Field

from engine.config import Config
from engine.db import Database
from engine.memory import MemoryEngine
from engine.offload import run_cpu
from engine.sim.beliefs import Beliefs, load_beliefs
from engine.sim.report import chat_store
from engine.sim.report.agent import CITATION, report_dir, run_context
from engine.sim.report.loop import ToolsRefused, tool_loop
from engine.sim.report.post_search import MemoryPostSearch
from engine.sim.report.sources import PersonaInterviewer, RunInterviewer, StoreGraph, load_roster
from engine.sim.report.stats import compute_stats
from engine.sim.report.tools import TOOLS, ReportTools

QUESTION_MAX_CHARS = 2000

ANSWERER = """You are the report agent of a multi-agent social-media simulation (Twitter-like and \
Reddit-like platforms) run to answer a prediction requirement. You wrote the report given below. \
Now people in a chat ask you about the simulation; earlier questions and your answers come first.
When the report does not settle the question, check with the tools: insight_forge for a deep \
search of the knowledge graph and the posts, quick_search for one detail, panorama_search for how \
facts changed, simulation_statistics for figures, belief_series for how the agents' stances moved \
round by round, interview_agents to ask agents.
Answer in at most 200 words of plain chat Markdown. Cite evidence exactly as the tools or the \
report give it: [fact 7], [twitter post 12], [reddit post 3], [agent @username]. An interview \
answer marked "answered" was role-played from the persona: say so. When belief_series says the \
stances were not tracked, say that rather than guessing. Do not invent figures or citations."""

NO_TOOLS = ANSWERER.split("\nWhen the report", 1)[0] + """
Answer from the report alone, in at most 200 words of plain chat Markdown, citing as it does:
[fact 7], [twitter post 12], [reddit post 3], [agent @username]. Do not invent figures or citations."""


def chat_job(sim_id: str) -> str:
    """The usage ledger's job for the questions about ``sim_id``."""
    return f"report-chat:{sim_id}"


# -- the belief series --------------------------------------------------------------------------

class BeliefSeriesArgs(BaseModel):
    """How the agents' stances towards the requirement's subject moved: per round (from 1) and
    platform, how many agents were for, neutral and against, and their mean score in [-1, 1]."""
    platform: Literal["twitter", "reddit", "both"] = Field("both", description="which platform's series")


BeliefLoader = Callable[[], Awaitable[Beliefs]]


class ChatTools(ReportTools):
    """The report agent's tools, plus the belief series, for questions in the chat."""

    TOOLS = {**TOOLS, "belief_series": BeliefSeriesArgs}

    def __init__(self, *args: Any, beliefs: BeliefLoader, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.beliefs = beliefs

    async def belief_series(self, args: BeliefSeriesArgs) -> dict:
        found = await self.beliefs()
        rounds = [{"platform": p, "round": r, "for": split.for_, "neutral": split.neutral, "against": split.against,
                   "mean": split.mean}
                  for p in found.platforms() if args.platform in ("both", p)
                  for r in found.rounds(p) if (split := found.split(p, r)) is not None]
        if not rounds:
            return {"tracked": False, "note": "not tracked: no agent's stance was classified in this simulation"}
        return {"tracked": True, "rounds": rounds}


# -- one question -------------------------------------------------------------------------------

@dataclass
class ReportAnswer:
    text: str
    tool_calls: int = 0
    citations: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)   # cited, returned by no tool, not in the report


def report_exists(folder: Path) -> bool:
    return (report_dir(folder) / "report.md").exists()


def _report_sources(folder: Path) -> set[str]:
    """The citations the report verified when it was written (report.json)."""
    path = report_dir(folder) / "report.json"
    if not path.exists():
        return set()
    data = json.loads(path.read_text(encoding="utf-8"))
    return set(data.get("citations", [])) - set(data.get("unverified_citations", []))


def _read_report(folder: Path, chars: int) -> tuple[str, set[str]]:
    text = (report_dir(folder) / "report.md").read_text(encoding="utf-8")
    if len(text) > chars:
        text = text[:chars] + "\n…(the rest of the report is cut)"
    return text, _report_sources(folder)


async def ask_report(db: Database, config: Config, llm, store, runs, sim_id: str, folder: Path | str,
                     requirement: str, question: str, *, memory: MemoryEngine, scope: str, channel: str,
                     asked_by: str = "") -> ReportAnswer:
    """Answer ``question`` about simulation ``sim_id`` (its report written, its run in ``folder``)
    and keep the exchange for the channel's next questions. ``store``: the graph store; ``runs``:
    the run service (interviews of the live agents, from their personas when unreachable);
    ``memory``: the memory engine whose recall over the simulation's scope finds its posts."""
    folder = Path(folder)
    cfg = config.report
    job = chat_job(sim_id)
    await llm.usage.check(job, scope)   # a cap reached: refused before any work
    report, verified = await run_cpu(_read_report, folder, cfg.chat_report_chars)
    stats = await run_cpu(compute_stats, folder)
    roster = await run_cpu(load_roster, folder)
    interviewer = RunInterviewer(runs, sim_id, fallback=PersonaInterviewer(llm, folder, job, scope))
    posts = MemoryPostSearch(memory, sim_id, folder, stats)
    await posts.prepare()
    tools = ChatTools(stats, StoreGraph(store, sim_id), interviewer, roster, llm, posts=posts, job=job, scope=scope,
                      result_chars=cfg.tool_result_chars, beliefs=lambda: load_beliefs(db, sim_id))
    history = await chat_store.recent(db, sim_id, scope, channel, cfg.chat_history)
    context = f"{run_context(requirement, stats)}\n\nThe report (report.md):\n{report}"
    turns: list[dict[str, Any]] = []
    for exchange in history:
        turns += [{"role": "user", "content": exchange.question}, {"role": "assistant", "content": exchange.answer}]
    turns.append({"role": "user", "content": question})
    try:
        text = await tool_loop(llm, [{"role": "system", "content": f"{ANSWERER}\n\n{context}"}, *turns], tools,
                               cfg.chat_max_tool_turns, final_prompt="Answer the question now from what you found.",
                               empty_prompt="That was empty: answer the question now.", job=job, scope=scope)
    except ToolsRefused:
        text = await llm.chat([{"role": "system", "content": f"{NO_TOOLS}\n\n{context}"}, *turns], job=job,
                              scope=scope)
    text = text.strip() or "The report agent gave no answer."
    cited = list(dict.fromkeys(CITATION.findall(text)))
    answer = ReportAnswer(text, len(tools.calls), cited,
                          [c for c in cited if c not in tools.sources and c not in verified])
    await chat_store.record(db, sim_id, scope, channel, asked_by, question, text, answer.tool_calls,
                            len(answer.unverified))
    return answer
