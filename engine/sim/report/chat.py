"""Report chat: a question about a simulation, answered by its report agent with its tools.

``ask_report`` answers one question (``/report <sim> ask <question>``, or a reply to the
report's messages in the chat) about a simulation whose report is written:

- the prompt holds the requirement, the run in figures, the report itself (``report.md``, cut to
  ``[report] chat_report_chars``) and the last ``[report] chat_history`` questions and answers
  about this simulation in the same channel (``chat_store``), as earlier turns of the chat;
- the model gathers evidence with the report agent's tools (graph search, statistics,
  interviews, posts) plus ``belief_series`` (the for / neutral / against split per round and
  platform, from table ``sim_stances`` read by ``engine.sim.stance.history``; "not tracked" when there
  is none), in at most
  ``[report] chat_max_tool_turns`` tool turns of the report agent's own loop (``loop``) and
  ``chat_max_tool_calls`` tool calls in all;
- its ``interview_agents`` tool follows /interview's rule for the person asking: offered only to
  the simulation's starter or an administrator (``may_interview``, decided by the chat), and then
  for at most ``chat_max_interviewed`` agents per question, however many the model names;
- the answer cites like the report ([fact 7], [twitter post 12], [agent @name]); a citation that
  no tool returned for this question and that the report does not list among its verified
  sources is flagged (``ReportAnswer.unverified``).

Every LLM call (the agent's turns, the query split, persona interviews) is counted against the
scope, the person asking (engine.llm.usage ``spender``) and the job ``chat_job(sim_id)``: the
questions about one simulation count as one job, so ``[llm] job_budget_*`` caps them together
and the daily caps of the scope and of the person hold too.
A cap reached raises ``BudgetExceeded`` before any request is sent. An endpoint that refuses
tool calling gets the question with the report alone.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from pydantic import BaseModel, Field

from engine import language
from engine.config import Config
from engine.db import Database
from engine.i18n import _
from engine.memory import MemoryEngine, languages
from engine.offload import run_cpu
from engine.sim.report import chat_store
from engine.sim.report.agent import CITATION, ensemble_note, report_dir, run_context
from engine.sim.report.loop import ToolsRefused, tool_loop
from engine.sim.report.post_search import MemoryPostSearch
from engine.sim.report.sources import PersonaInterviewer, RunInterviewer, StoreGraph, load_roster
from engine.sim.report.stats import compute_stats
from engine.sim.report.tools import TOOLS, InterviewAgentsArgs, ReportTools, tool_schemas
from engine.sim.stance.history import Beliefs, load_beliefs

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

    def __init__(self, *args: Any, beliefs: BeliefLoader, interviews: int, may_interview: bool = True,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.beliefs = beliefs
        self.may_interview = may_interview
        self.interview_cap = interviews if may_interview else 0
        self.interviews_left = self.interview_cap
        self._not_asked = 0   # agents a call named beyond the cap

    def schemas(self) -> list[dict[str, Any]]:
        offered = self.offered if self.interview_cap else {k: v for k, v in self.offered.items()
                                                            if k != "interview_agents"}
        return tool_schemas(offered)

    async def interview_agents(self, args: InterviewAgentsArgs) -> dict:
        if not self.may_interview:
            return {"error": "only the person who started this simulation or an administrator may have its agents "
                             "interviewed; answer without interviews"}
        if self.interviews_left <= 0:
            return {"error": f"this question's interviews are used up ({self.interview_cap} agents at most); answer "
                             "from what you have"}
        self._not_asked = 0
        result = await super().interview_agents(args)
        if self._not_asked:
            result["not_interviewed"] = (f"{self._not_asked} more agents: at most {self.interview_cap} are interviewed "
                                         "per question")
        return result

    async def _choose(self, args: InterviewAgentsArgs):
        agents, unknown = await super()._choose(args)
        kept = agents[: self.interviews_left]
        self._not_asked = len(agents) - len(kept)
        self.interviews_left -= len(kept)
        return kept, unknown

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
                     asked_by: str = "", may_interview: bool = True, ensemble=None,
                     lang: str = language.DEFAULT) -> ReportAnswer:
    """Answer ``question`` about simulation ``sim_id`` (its report written, its run in ``folder``)
    and keep the exchange for the channel's next questions. ``store``: the graph store; ``runs``:
    the run service (interviews of the live agents, from their personas when unreachable);
    ``memory``: the memory engine whose recall over the simulation's scope finds its posts;
    ``may_interview``: whether the person asking may have the agents interviewed (/interview's rule);
    ``lang``: the simulation's language, which its agents and searches use and the answer too
    unless the question is surely in another (engine.memory.languages). An ``ensemble``
    (engine.sim.ensemble.report) is asked about as its report was written: the tools read its
    median-most run and see every run through ``ensemble_runs``."""
    folder = Path(folder)
    cfg = config.report
    job = chat_job(sim_id)
    await llm.usage.check(job, scope)   # a cap reached: refused before any work
    report, verified = await run_cpu(_read_report, folder, cfg.chat_report_chars)
    run_id, run_folder = (sim_id, folder) if ensemble is None else (ensemble.representative.id,
                                                                   ensemble.representative.folder)
    stats = await run_cpu(compute_stats, run_folder)
    roster = await run_cpu(load_roster, run_folder)
    interviewer = RunInterviewer(runs, run_id, fallback=PersonaInterviewer(llm, run_folder, job, scope, lang=lang))
    posts = MemoryPostSearch(memory, run_id, run_folder, stats)
    await posts.prepare()
    tools = ChatTools(stats, StoreGraph(store, sim_id), interviewer, roster, llm, posts=posts, job=job, scope=scope,
                      result_chars=cfg.tool_result_chars, beliefs=lambda: load_beliefs(db, run_id),
                      interviews=cfg.chat_max_interviewed, may_interview=may_interview, ensemble=ensemble, lang=lang)
    history = await chat_store.recent(db, sim_id, scope, channel, cfg.chat_history)
    note = ensemble_note(ensemble) if ensemble is not None else ""
    answer_lang = await run_cpu(languages.of_text, question) or lang
    context = (f"{language.answer_in(answer_lang)}\n{run_context(requirement, stats, note)}\n\n"
               f"The report (report.md):\n{report}")
    turns: list[dict[str, Any]] = []
    for exchange in history:
        turns += [{"role": "user", "content": exchange.question}, {"role": "assistant", "content": exchange.answer}]
    turns.append({"role": "user", "content": question})
    try:
        text = await tool_loop(llm, [{"role": "system", "content": f"{ANSWERER}\n\n{context}"}, *turns], tools,
                               cfg.chat_max_tool_turns, final_prompt="Answer the question now from what you found.",
                               empty_prompt="That was empty: answer the question now.", job=job, scope=scope,
                               max_calls=cfg.chat_max_tool_calls)
    except ToolsRefused:
        text = await llm.chat([{"role": "system", "content": f"{NO_TOOLS}\n\n{context}"}, *turns], job=job,
                              scope=scope, language=answer_lang)
    text = text.strip() or _("The report agent gave no answer.")
    cited = list(dict.fromkeys(CITATION.findall(text)))
    answer = ReportAnswer(text, len(tools.calls), cited,
                          [c for c in cited if c not in tools.sources and c not in verified])
    await chat_store.record(db, sim_id, scope, channel, asked_by, question, text, answer.tool_calls,
                            len(answer.unverified))
    return answer
