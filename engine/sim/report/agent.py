"""The report agent: plans an outline, then writes each section with native tool calling.

1. Outline: one structured call (2..max_sections sections) for the requirement.
2. Each section: a bounded loop of chat completions with ``tools=[...]`` (``loop.tool_loop``,
   shared with report chat). While the model asks for tools, they run and their results go
   back as ``tool`` messages; after ``tool_turns`` turns one last request with
   ``tool_choice="none"`` makes it write from what it gathered.
3. A short summary for chat, then ``report.md`` with the charts, the sections and their sources.

The outline, the sections, the summary, the sub-queries of its searches and role-played
interviews are asked for in the simulation's language (``lang``, its spec's); the live agents
write in it already (engine.sim.run.schedule.language_note). A summary, a section written
without tools or an interview that comes back in another language is asked again once
(``LLMClient.chat(language=...)``); a section written in the tool loop has the instruction only.

An endpoint that refuses tool calling (400 on ``tools``) still gets a report: the agent runs
insight_forge, simulation_statistics and interview_agents itself for each section and asks
for the text with that evidence in the prompt.

Checkpoints: the outline and each finished section are files under ``<sim>/report/``, so a
resumed job writes only what is missing.

The report's fixed text (headings, the run at a glance, the timeline, sources, interviews,
progress lines) is in the current language (engine.i18n: the report job's); the prompts stay
English, their counts outside the catalogs (``in_english``).
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from pydantic import BaseModel

from engine import language
from engine.config import ReportSection
from engine.i18n import _, english, number
from engine.llm.content_checks import ContentChecks
from engine.llm.errors import InvalidAnswer
from engine.memory import MemoryEngine
from engine.offload import run_cpu
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.report.charts import TITLES, draw_charts
from engine.sim.report.loop import ToolsRefused, tool_loop
from engine.sim.report.post_search import MemoryPostSearch
from engine.sim.report.sources import GraphSearch, Interviewer, load_roster
from engine.sim.report.stats import SimStats, compute_stats
from engine.sim.report.tools import ReportTools
from engine.words import in_english, joined, plural

log = logging.getLogger(__name__)

REPORT_DIR = "report"
CITATION = re.compile(r"\[(?:fact \d+|(?:run \d+ )?(?:twitter|reddit) post \d+|agent @[\w.\-]+)\]")
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


def run_context(requirement: str, s: SimStats, note: str = "") -> str:
    """The lines the agent's prompts start with: the requirement, the run in figures, and ``note``
    (an ensemble: which run the figures are of, and what all the runs say)."""
    return (f"Requirement: {requirement}\nThe run: "
            f"{in_english(len(s.agents), '{n} agent', '{n} agents')} on {', '.join(s.platforms)}, "
            f"{in_english(s.rounds_done, '{n} round', '{n} rounds')}, "
            f"{in_english(s.total_actions, '{n} action', '{n} actions')}." + (f"\n{note}" if note else ""))


def run_line(s: SimStats) -> str:
    """The run in figures, as the report's reader reads it (the second line of ``run_context``)."""
    return _("The run: {agents} on {platforms}, {rounds}, {actions}.",
             agents=plural(len(s.agents), "{n} agent", "{n} agents"), platforms=", ".join(s.platforms),
             rounds=plural(s.rounds_done, "{n} round", "{n} rounds"),
             actions=plural(s.total_actions, "{n} action", "{n} actions"))


def ensemble_note(ensemble) -> str:
    """The context line of an ensemble's report and report chat (``ensemble``: engine.sim.ensemble.report)."""
    rep = ensemble.representative
    confidence = english(ensemble.spread.confidence_line)
    return (f"This simulation is an ensemble of {in_english(ensemble.size, '{n} run', '{n} runs')} with different "
            f"seeds; the figures above, the posts and the agents are of run {rep.run_no}, the median-most run. Across "
            f"the runs: {confidence} Call ensemble_runs to see every run, cite their posts as "
            f"[run 3 twitter post 12], and never present the outcome as more certain than the runs agree.")


def report_dir(sim_dir: Path) -> Path:
    return Path(sim_dir) / REPORT_DIR


class ReportAgent:
    def __init__(self, llm, tools: ReportTools, sim_dir: Path, requirement: str, config: ReportSection,
                 *, job: str | None = None, scope: str | None = None, progress: Progress | None = None,
                 note: str = "", lead: str = "", lang: str = language.DEFAULT):
        self.llm = llm
        self.tools = tools
        self.dir = report_dir(sim_dir)
        self.requirement = requirement
        self.config = config
        self.lang = lang   # what the outline, sections and summary are written in (the simulation's)
        self.job, self.scope = job, scope
        self.note = note    # a line of context after the run's figures (an ensemble's)
        self.lead = lead    # a line the summary starts with (an ensemble's confidence line)
        self._progress = progress
        self._fraction = 0.0
        self.native_tools = True   # false once the endpoint has refused tool calling

    async def progress(self, fraction: float | None, message: str) -> None:
        """Report progress; None keeps the fraction last reported (a tool call within a section)."""
        self._fraction = self._fraction if fraction is None else fraction
        if self._progress:
            await self._progress(self._fraction, message)

    def _context(self) -> str:
        return run_context(self.requirement, self.tools.stats, self.note)

    async def plan(self) -> Outline:
        path = self.dir / "outline.json"
        if path.exists():
            return Outline.model_validate_json(path.read_text(encoding="utf-8"))
        try:
            outline = await self.llm.structured(Outline, [
                {"role": "system", "content": f"Plan an analytical report that answers the requirement from a "
                                              f"social-media simulation. Give it a title and 2 to "
                                              f"{self.config.max_sections} sections; each has a title and a focus: "
                                              f"the question the section answers. {language.answer_in(self.lang)}"},
                {"role": "user", "content": self._context()}], job=self.job, scope=self.scope,
                checks=OUTLINE_CHECKS)
        except InvalidAnswer as err:  # junk or no outline: the default sections below
            log.warning("report outline: unusable answer, using the default sections (%s)", err)
            outline = Outline(title="", sections=[])
        sections = [p for p in outline.sections if p.title.strip()][: self.config.max_sections]
        # default titles are read in the report (translated); their focus is for the prompt (English)
        defaults = [SectionPlan(title=_("What happened"), focus="How the simulated discussion unfolded"),
                    SectionPlan(title=_("Outlook"), focus=f"What the simulation suggests for: {self.requirement}")]
        while len(sections) < 2:
            sections.append(defaults[len(sections)])
        outline = Outline(title=outline.title.strip() or _("Simulation report"), sections=sections)
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
        messages: list[dict[str, Any]] = [{"role": "system", "content": f"{WRITER}\n{language.answer_in(self.lang)}"},
                                          {"role": "user", "content": self._brief(outline, index)}]

        async def on_call(name: str) -> None:
            await self.progress(None, _("section {number}: {tool}", number=index + 1, tool=name))

        try:
            text = await tool_loop(self.llm, messages, self.tools, self.config.tool_turns,
                                   final_prompt="Write the section now from the evidence gathered.",
                                   empty_prompt="That was empty: write the section body now.",
                                   job=self.job, scope=self.scope, on_call=on_call)
        except ToolsRefused as err:
            log.warning("the endpoint refused tool calling (%s); gathering evidence without it", err)
            self.native_tools = False
            return await self.write_without_tools(outline, index)
        return text or no_text()

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
            {"role": "system", "content": f"{WRITER_NO_TOOLS}\n{language.answer_in(self.lang)}"},
            {"role": "user", "content": self._brief(outline, index) + "\n\nEvidence:\n"
                                        + "\n".join(f"{k}: {v}" for k, v in evidence.items())}],
            job=self.job, scope=self.scope, language=self.lang)
        return text.strip() or no_text()

    async def summarise(self, outline: Outline, sections: list[tuple[str, str]]) -> str:
        body = "\n\n".join(f"## {t}\n{b}" for t, b in sections)
        text = await self.llm.chat([
            {"role": "system", "content": f"Summarise this report for a chat message in at most "
                                          f"{self.config.summary_chars} characters: the answer to the "
                                          "requirement first, then the two or three key findings. Plain text. "
                                          f"{language.answer_in(self.lang)}"},
            {"role": "user", "content": f"Requirement: {self.requirement}\n# {outline.title}\n{body}"[:24000]}],
            job=self.job, scope=self.scope, language=self.lang)
        text = text.strip() or sections[0][1]
        if self.lead:
            text = f"{self.lead}\n{text}"
        return text if len(text) <= self.config.summary_chars else text[: self.config.summary_chars - 1] + "…"

    async def run(self, charts: dict[str, Path], sim_id: str, appendix: Sequence[tuple[str, str]] = (),
                  front: tuple[str, str] | None = None) -> ReportResult:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "sections").mkdir(exist_ok=True)
        await self.progress(0.05, _("planning the report"))
        outline = await self.plan()
        sections = []
        for i, plan in enumerate(outline.sections):
            path = self.dir / "sections" / f"{i + 1:02d}.md"
            if not path.exists():
                await self.progress(0.1 + 0.8 * i / len(outline.sections),
                                    _("writing section {number}/{total}: {title}", number=i + 1,
                                      total=len(outline.sections), title=plan.title))
                path.write_text(await self.write_section(outline, i), encoding="utf-8")
            sections.append((plan.title, path.read_text(encoding="utf-8")))
        await self.progress(0.95, _("summarising"))
        summary = await self.summarise(outline, sections)
        cited = list(dict.fromkeys(c for _, body in sections for c in CITATION.findall(body)))
        unverified = [c for c in cited if c not in self.tools.sources]
        markdown = self.render(outline, sections, summary, charts, cited, sim_id, appendix, front)
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
               cited: list[str], sim_id: str, appendix: Sequence[tuple[str, str]] = (),
               front: tuple[str, str] | None = None) -> str:
        """report.md; ``front``: a computed section (title, Markdown) that comes first, with the
        charts (an ensemble's "Across the runs"; the run at a glance is then its median-most run's)."""
        s: SimStats = self.tools.stats
        lines = [f"# {outline.title}", "",
                 "*" + _("Simulation `{sim}`", sim=sim_id) + f" · {run_line(s)}*", "",
                 *(["*" + _("This simulation is an ensemble of {runs} with different seeds.",
                            runs=plural(self.tools.ensemble.size, "{n} run", "{n} runs")) + "*", ""]
                   if self.tools.ensemble is not None else []),
                 "**" + _("Requirement:") + f"** {self.requirement}", "", "## " + _("Summary"), "", summary, ""]
        if front is not None:
            lines += [f"## {front[0]}", ""]
        else:
            lines += ["## " + _("The run at a glance"), ""]
        for name, chart in charts.items():
            rel = Path(chart).relative_to(self.dir) if Path(chart).is_relative_to(self.dir) else Path(chart)
            lines += [f"![{_(TITLES[name]) if name in TITLES else name}]({rel.as_posix()})", ""]
        if front is not None:
            lines += [front[1].strip(), "", "## " + _("The median-most run at a glance"), ""]
        if s.platforms:
            lines += ["| | " + " | ".join(s.platforms) + " |", "|---|" + "---|" * len(s.platforms)]
            rows = [(_("actions"), [sum(s.rounds.get(p, {}).values()) or sum(s.mix.get(p, {}).values())
                                    for p in s.platforms]),
                    (_("posts"), [sum(1 for x in s.posts if x.platform == p) for p in s.platforms]),
                    (_("skipped agent steps"), [s.skipped_steps.get(p, 0) for p in s.platforms])]
            lines += [f"| {name} | " + " | ".join(map(str, values)) + " |" for name, values in rows]
            lines.append("")
            lines.append(skipped_line(s))
            lines.append("")
        lines += timeline(s)
        for title, body in appendix:   # sections computed, not written by the model (diagnostics)
            lines += [f"## {title}", "", body.strip(), ""]
        for i, (title, body) in enumerate(sections):
            lines += [f"## {i + 1}. {title}", "", body.strip(), ""]
        if cited:
            lines += ["## " + _("Sources"), ""]
            unknown = _("(not returned by any tool)")
            lines += [f"- {c} {self.tools.sources.get(c) or unknown}" for c in cited]
            lines.append("")
        if self.tools.quotes:
            lines += ["## " + _("Interviews"), ""]
            lines += ["- " + _("**@{agent}** on {platform}, asked \"{question}\": \"{answer}\"", agent=q["agent"],
                               platform=q["platform"], question=q["question"], answer=q["answer"])
                      + (f" ({q['label']})" if q.get("label") else "") for q in self.tools.quotes]
            lines.append("")
        return "\n".join(lines)


def no_text() -> str:
    """A section's body when the writer gave none."""
    return _("_The writer gave no text for this section._")


def timeline(stats: SimStats) -> list[str]:
    """The run round by round (from 1): actions per platform, and the events injected into it."""
    rounds = sorted({r for per in stats.rounds.values() for r in per})
    if not rounds:
        return []
    events: dict[int, list] = {}
    for e in stats.injected:
        events.setdefault(e.round, []).append(e)
    lines = ["## " + _("Timeline"), ""]
    for r in rounds:
        counts = ", ".join(f"{p} {stats.rounds[p].get(r, 0)}" for p in stats.platforms if p in stats.rounds)
        lines.append("- " + _("**Round {round}**: {actions} ({counts})", round=r + 1, counts=counts,
                              actions=plural(sum(per.get(r, 0) for per in stats.rounds.values()),
                                             "{n} action", "{n} actions")))
        for e in events.get(r, []):
            said = _("📰 injected event: {source} posted on {platforms}: “{text}”", source=e.source,
                     platforms=joined(e.posts), text=e.text)
            asked = _(", asked by {person}", person=e.asked_by) if e.asked_by else ""
            lines.append(f"  - {said}{asked} {e.cites()}")
    return lines + [""]


def skipped_line(stats: SimStats) -> str:
    """How many agent steps were skipped because the model's answer stayed unusable."""
    total = sum(stats.skipped_steps.values())
    if not total:
        return _("No agent step was skipped: every agent's model answer was usable.")
    where = ", ".join(_("{n} on {platform}", n=n, platform=p) for p, n in stats.skipped_steps.items() if n)
    return plural(total, "{n} agent step was skipped ({where}): the model's answer was unusable twice in a row (the "
                  "reasons are in each platform's actions.jsonl).", "{n} agent steps were skipped ({where}): the "
                  "model's answer was unusable twice in a row (the reasons are in each platform's actions.jsonl).",
                  where=where)


def load_sim_config(sim_dir: Path) -> SimulationConfig | None:
    path = Path(sim_dir) / CONFIG_FILE
    return SimulationConfig.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None


async def write_report(sim_dir: Path | str, llm, graph: GraphSearch, interviewer: Interviewer,
                       config: ReportSection, *, memory: MemoryEngine, requirement: str = "", sim_id: str = "",
                       job: str | None = None, scope: str | None = None,
                       progress: Progress | None = None, extra_charts: dict[str, Path] | None = None,
                       appendix: Sequence[tuple[str, str]] = (), ensemble=None,
                       lang: str = language.DEFAULT) -> ReportResult:
    """Step 5: statistics, charts and the written report of a finished (or running) simulation,
    written in language ``lang`` (the simulation's). Its post search is ``memory``'s recall over
    the simulation's scope, which the run is fed into first (engine.sim.report.post_search);
    ``extra_charts`` (drawn by the caller) join the charts, ``appendix`` sections (title,
    Markdown) follow the run at a glance.

    An ``ensemble`` (engine.sim.ensemble.report) is reported as one: ``sim_dir`` is its
    representative run's folder, whose posts and agents the sections read; the report goes into
    the head's folder, its section "Across the N runs" first with the ensemble's charts only
    (``extra_charts``), its context and summary say what all the runs say, and the agent's tools
    see every run (``ensemble_runs``)."""
    sim_dir = Path(sim_dir)
    sim_config = load_sim_config(sim_dir)
    requirement = requirement or (sim_config.requirement if sim_config else "")
    sim_id = sim_id or (sim_config.sim_id if sim_config else sim_dir.name)
    stats = await run_cpu(compute_stats, sim_dir)
    charts = {**(await run_cpu(draw_charts, stats, sim_dir) if ensemble is None else {}), **(extra_charts or {})}
    roster = await run_cpu(load_roster, sim_dir)
    posts = MemoryPostSearch(memory, sim_id, sim_dir, stats)
    await posts.prepare()
    tools = ReportTools(stats, graph, interviewer, roster, llm, posts=posts, job=job, scope=scope,
                        result_chars=config.tool_result_chars, ensemble=ensemble, lang=lang)
    out = sim_dir if ensemble is None else ensemble.head.folder
    agent = ReportAgent(llm, tools, out, requirement, config, job=job, scope=scope, progress=progress,
                        note=ensemble_note(ensemble) if ensemble is not None else "",
                        lead=f"🎯 {ensemble.spread.confidence_line()}" if ensemble is not None else "", lang=lang)
    if ensemble is None:
        return await agent.run(charts, sim_id, appendix)
    front = (_("Across the {n} runs", n=number(ensemble.size)), ensemble.section())
    return await agent.run(charts, ensemble.head.id, appendix, front)
