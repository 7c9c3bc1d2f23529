"""The report agent: plans an outline, then writes each section with native tool calling.

1. Outline: one structured call (2..max_sections sections) for the requirement.
2. Each section: a bounded loop of chat completions with ``tools=[...]``. While the model asks
   for tools, they run and their results go back as ``tool`` messages; after ``tool_turns``
   turns one last request with ``tool_choice="none"`` makes it write from what it gathered.
3. A short summary for chat, then ``report.md`` with the charts, the sections and their sources.

An endpoint that refuses tool calling (400 on ``tools``) still gets a report: the agent runs
insight_forge, simulation_statistics and interview_agents itself for each section and asks
for the text with that evidence in the prompt.

Checkpoints: the outline and each finished section are files under ``<sim>/report/``, so a
resumed job writes only what is missing.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from pydantic import BaseModel

from engine.config import ReportSection
from engine.llm.content_checks import ContentChecks
from engine.llm.errors import InvalidAnswer, RequestRejected
from engine.offload import run_cpu
from engine.sim.envmodels import CONFIG_FILE, SimulationConfig
from engine.sim.report.charts import TITLES, draw_charts
from engine.sim.report.sources import GraphSearch, Interviewer, load_roster
from engine.sim.report.stats import SimStats, compute_stats
from engine.sim.report.tools import ReportTools, tool_schemas
from engine.words import plural

log = logging.getLogger(__name__)

REPORT_DIR = "report"
CITATION = re.compile(r"\[(?:fact \d+|(?:twitter|reddit) post \d+|agent @[\w.\-]+)\]")
Progress = Callable[[float, str], Awaitable[None]]

WRITER = """You write one section of an analytical report about a multi-agent social-media \
simulation (Twitter-like and Reddit-like platforms) run to answer a prediction requirement.
Gather evidence with the tools before writing: insight_forge for the section's question, \
simulation_statistics for figures, interview_agents to quote agents, panorama_search to see how \
facts changed, quick_search for one detail.
Then answer with the section body only, in Markdown, without the section heading, 150-400 words.
Cite evidence exactly as the tools give it: [fact 7], [twitter post 12], [reddit post 3], \
[agent @username]. Quote interviewed agents with their citation; an answer marked "answered" was \
role-played from the persona, so say so when you use it. Do not invent figures or citations."""

WRITER_NO_TOOLS = WRITER.split("\nGather evidence", 1)[0] + """
The evidence gathered for this section is given as JSON tool results. Answer with the section
body only, in Markdown, without the section heading, 150-400 words. Cite evidence exactly as
it is given: [fact 7], [twitter post 12], [reddit post 3], [agent @username]. An answer marked
"answered" was role-played from the persona: say so when you use it. Do not invent figures or
citations."""


class SectionPlan(BaseModel):
    title: str
    focus: str


class Outline(BaseModel):
    title: str
    sections: list[SectionPlan]


OUTLINE_CHECKS = ContentChecks(texts=("title", "sections[].title", "sections[].focus"))


@dataclass
class ReportResult:
    path: Path
    title: str
    summary: str
    charts: dict[str, Path]
    sections: list[tuple[str, str]]
    tool_calls: int = 0
    citations: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)   # cited, but returned by no tool


def report_dir(sim_dir: Path) -> Path:
    return Path(sim_dir) / REPORT_DIR


class ReportAgent:
    def __init__(self, llm, tools: ReportTools, sim_dir: Path, requirement: str, config: ReportSection,
                 *, job: str | None = None, scope: str | None = None, progress: Progress | None = None):
        self.llm = llm
        self.tools = tools
        self.dir = report_dir(sim_dir)
        self.requirement = requirement
        self.config = config
        self.job, self.scope = job, scope
        self._progress = progress
        self._fraction = 0.0
        self.native_tools = True   # false once the endpoint has refused tool calling

    async def progress(self, fraction: float | None, message: str) -> None:
        """Report progress; None keeps the fraction last reported (a tool call within a section)."""
        self._fraction = self._fraction if fraction is None else fraction
        if self._progress:
            await self._progress(self._fraction, message)

    def _context(self) -> str:
        s = self.tools.stats
        return (f"Requirement: {self.requirement}\nThe run: {plural(len(s.agents), 'agent')} on {', '.join(s.platforms)}, "
                f"{plural(s.rounds_done, 'round')}, {plural(s.total_actions, 'action')}.")

    async def plan(self) -> Outline:
        path = self.dir / "outline.json"
        if path.exists():
            return Outline.model_validate_json(path.read_text(encoding="utf-8"))
        try:
            outline = await self.llm.structured(Outline, [
                {"role": "system", "content": f"Plan an analytical report that answers the requirement from a "
                                              f"social-media simulation. Give it a title and 2 to "
                                              f"{self.config.max_sections} sections; each has a title and a focus: "
                                              "the question the section answers."},
                {"role": "user", "content": self._context()}], job=self.job, scope=self.scope,
                checks=OUTLINE_CHECKS)
        except InvalidAnswer as err:  # junk or no outline: the default sections below
            log.warning("report outline: unusable answer, using the default sections (%s)", err)
            outline = Outline(title="", sections=[])
        sections = [p for p in outline.sections if p.title.strip()][: self.config.max_sections]
        defaults = [SectionPlan(title="What happened", focus="How the simulated discussion unfolded"),
                    SectionPlan(title="Outlook", focus=f"What the simulation suggests for: {self.requirement}")]
        while len(sections) < 2:
            sections.append(defaults[len(sections)])
        outline = Outline(title=outline.title.strip() or "Simulation report", sections=sections)
        path.write_text(outline.model_dump_json(indent=2), encoding="utf-8")
        return outline

    def _brief(self, outline: Outline, index: int) -> str:
        plan = outline.sections[index]
        listing = "\n".join(f"{i + 1}. {p.title}: {p.focus}" for i, p in enumerate(outline.sections))
        return (f"{self._context()}\nReport: {outline.title}\nOutline:\n{listing}\n\n"
                f"Write section {index + 1}, \"{plan.title}\": {plan.focus}")

    async def write_section(self, outline: Outline, index: int) -> str:
        if not self.native_tools:
            return await self.write_without_tools(outline, index)
        messages: list[dict[str, Any]] = [{"role": "system", "content": WRITER},
                                          {"role": "user", "content": self._brief(outline, index)}]
        tools = tool_schemas()
        for turn in range(self.config.tool_turns + 1):
            final = turn == self.config.tool_turns
            if final:
                messages.append({"role": "user", "content": "Write the section now from the evidence gathered."})
            try:
                message = await self.llm.complete(messages, tools=tools, tool_choice="none" if final else "auto",
                                                  job=self.job, scope=self.scope)
            except RequestRejected as err:
                if turn or err.status_code not in (400, 422):
                    raise
                log.warning("the endpoint refused tool calling (%s); gathering evidence without it", err)
                self.native_tools = False
                return await self.write_without_tools(outline, index)
            text = (message.content or "").strip()
            if not message.tool_calls or final:
                if text or final:
                    return text or "_The writer gave no text for this section._"
                messages.append({"role": "user", "content": "That was empty: write the section body now."})
                continue
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                await self.progress(None, f"section {index + 1}: {call.function.name}")
                result = await self.tools.call(call.function.name, call.function.arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise AssertionError("unreachable: the last turn always returns")

    async def write_without_tools(self, outline: Outline, index: int) -> str:
        """The same evidence a tool-calling model would fetch, gathered here and put in the prompt."""
        focus = outline.sections[index].focus
        evidence = {
            "insight_forge": await self.tools.call("insight_forge", json.dumps({"question": focus})),
            "simulation_statistics": await self.tools.call("simulation_statistics", '{"focus": "overview"}'),
            "interview_agents": await self.tools.call("interview_agents", json.dumps({"question": focus,
                                                                                      "count": 2})),
        }
        text = await self.llm.chat([
            {"role": "system", "content": WRITER_NO_TOOLS},
            {"role": "user", "content": self._brief(outline, index) + "\n\nEvidence:\n"
                                        + "\n".join(f"{k}: {v}" for k, v in evidence.items())}],
            job=self.job, scope=self.scope)
        return text.strip() or "_The writer gave no text for this section._"

    async def summarise(self, outline: Outline, sections: list[tuple[str, str]]) -> str:
        body = "\n\n".join(f"## {t}\n{b}" for t, b in sections)
        text = await self.llm.chat([
            {"role": "system", "content": f"Summarise this report for a chat message in at most "
                                          f"{self.config.summary_chars} characters: the answer to the "
                                          "requirement first, then the two or three key findings. Plain text."},
            {"role": "user", "content": f"Requirement: {self.requirement}\n# {outline.title}\n{body}"[:24000]}],
            job=self.job, scope=self.scope)
        text = text.strip() or sections[0][1]
        return text if len(text) <= self.config.summary_chars else text[: self.config.summary_chars - 1] + "…"

    async def run(self, charts: dict[str, Path], sim_id: str) -> ReportResult:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "sections").mkdir(exist_ok=True)
        await self.progress(0.05, "planning the report")
        outline = await self.plan()
        sections = []
        for i, plan in enumerate(outline.sections):
            path = self.dir / "sections" / f"{i + 1:02d}.md"
            if not path.exists():
                await self.progress(0.1 + 0.8 * i / len(outline.sections),
                                    f"writing section {i + 1}/{len(outline.sections)}: {plan.title}")
                path.write_text(await self.write_section(outline, i), encoding="utf-8")
            sections.append((plan.title, path.read_text(encoding="utf-8")))
        await self.progress(0.95, "summarising")
        summary = await self.summarise(outline, sections)
        cited = list(dict.fromkeys(c for _, body in sections for c in CITATION.findall(body)))
        unverified = [c for c in cited if c not in self.tools.sources]
        markdown = self.render(outline, sections, summary, charts, cited, sim_id)
        path = self.dir / "report.md"
        path.write_text(markdown, encoding="utf-8")
        (self.dir / "summary.txt").write_text(summary, encoding="utf-8")
        result = ReportResult(path, outline.title, summary, charts, sections, len(self.tools.calls), cited,
                              unverified)
        (self.dir / "report.json").write_text(json.dumps({
            "title": outline.title, "summary": summary, "charts": {k: str(v) for k, v in charts.items()},
            "tool_calls": result.tool_calls, "citations": cited, "unverified_citations": unverified},
            indent=2), encoding="utf-8")
        return result

    def render(self, outline: Outline, sections: list[tuple[str, str]], summary: str, charts: dict[str, Path],
               cited: list[str], sim_id: str) -> str:
        s: SimStats = self.tools.stats
        lines = [f"# {outline.title}", "",
                 f"*Simulation `{sim_id}` · {self._context().splitlines()[1]}*", "",
                 f"**Requirement:** {self.requirement}", "", "## Summary", "", summary, "",
                 "## The run at a glance", ""]
        for name, chart in charts.items():
            rel = Path(chart).relative_to(self.dir) if Path(chart).is_relative_to(self.dir) else Path(chart)
            lines += [f"![{TITLES.get(name, name)}]({rel.as_posix()})", ""]
        if s.platforms:
            lines += ["| | " + " | ".join(s.platforms) + " |", "|---|" + "---|" * len(s.platforms)]
            lines.append("| actions | " + " | ".join(str(sum(s.rounds.get(p, {}).values()) or
                                                          sum(s.mix.get(p, {}).values())) for p in s.platforms) + " |")
            lines.append("| posts | " + " | ".join(str(sum(1 for x in s.posts if x.platform == p))
                                                    for p in s.platforms) + " |")
            lines.append("| skipped agent steps | " + " | ".join(str(s.skipped_steps.get(p, 0))
                                                                  for p in s.platforms) + " |")
            lines.append("")
            lines.append(skipped_line(s))
            lines.append("")
        lines += timeline(s)
        for i, (title, body) in enumerate(sections):
            lines += [f"## {i + 1}. {title}", "", body.strip(), ""]
        if cited:
            lines += ["## Sources", ""]
            lines += [f"- {c} {self.tools.sources.get(c, '(not returned by any tool)')}" for c in cited]
            lines.append("")
        if self.tools.quotes:
            lines += ["## Interviews", ""]
            lines += [f"- **@{q['agent']}** on {q['platform']}, asked \"{q['question']}\": \"{q['answer']}\""
                      + (f" ({q['label']})" if q.get("label") else "") for q in self.tools.quotes]
            lines.append("")
        return "\n".join(lines)


def timeline(stats: SimStats) -> list[str]:
    """The run round by round (from 1): actions per platform, and the events injected into it."""
    rounds = sorted({r for per in stats.rounds.values() for r in per})
    if not rounds:
        return []
    events: dict[int, list] = {}
    for e in stats.injected:
        events.setdefault(e.round, []).append(e)
    lines = ["## Timeline", ""]
    for r in rounds:
        counts = ", ".join(f"{p} {stats.rounds[p].get(r, 0)}" for p in stats.platforms if p in stats.rounds)
        lines.append(f"- **Round {r + 1}**: {plural(sum(per.get(r, 0) for per in stats.rounds.values()), 'action')}"
                     f" ({counts})")
        for e in events.get(r, []):
            asked = f", asked by {e.asked_by}" if e.asked_by else ""
            lines.append(f"  - 📰 injected event: {e.source} posted on {' and '.join(e.posts)}: "
                         f"“{e.text}”{asked} {e.cites()}")
    return lines + [""]


def skipped_line(stats: SimStats) -> str:
    """How many agent steps were skipped because the model's answer stayed unusable."""
    total = sum(stats.skipped_steps.values())
    if not total:
        return "No agent step was skipped: every agent's model answer was usable."
    where = ", ".join(f"{n} on {p}" for p, n in stats.skipped_steps.items() if n)
    steps = "step was" if total == 1 else "steps were"
    return (f"{total} agent {steps} skipped ({where}): the model's answer was unusable twice in a row "
            f"(the reasons are in each platform's actions.jsonl).")


def load_sim_config(sim_dir: Path) -> SimulationConfig | None:
    path = Path(sim_dir) / CONFIG_FILE
    return SimulationConfig.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None


async def write_report(sim_dir: Path | str, llm, graph: GraphSearch, interviewer: Interviewer,
                       config: ReportSection, *, requirement: str = "", sim_id: str = "",
                       job: str | None = None, scope: str | None = None,
                       progress: Progress | None = None) -> ReportResult:
    """Step 5: statistics, charts and the written report of a finished (or running) simulation."""
    sim_dir = Path(sim_dir)
    sim_config = load_sim_config(sim_dir)
    requirement = requirement or (sim_config.requirement if sim_config else "")
    sim_id = sim_id or (sim_config.sim_id if sim_config else sim_dir.name)
    stats = await run_cpu(compute_stats, sim_dir)
    charts = await run_cpu(draw_charts, stats, sim_dir)
    roster = await run_cpu(load_roster, sim_dir)
    tools = ReportTools(stats, graph, interviewer, roster, llm, job=job, scope=scope,
                        result_chars=config.tool_result_chars)
    agent = ReportAgent(llm, tools, sim_dir, requirement, config, job=job, scope=scope, progress=progress)
    return await agent.run(charts, sim_id)
