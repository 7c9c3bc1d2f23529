"""Compare two futures: two runs (typically a parent and its fork) side by side.

What is compared, from each run's logs and platform databases (``engine/sim/report/stats``)
and its stances (``engine/sim/beliefs``):
- where they part: the rounds both played alike (``engine/sim/divergence``); what follows is
  compared from the first round after those (round 1 when they differ from the start);
- activity per round and the belief split per round of both, as overlay charts;
- the agents whose behaviour differs most after that round: the same people in both runs,
  matched by agent id; the difference is the actions taken, type by type, plus
  ``STANCE_WEIGHT`` x the change of the mean stance score;
- the posts: each run's most engaged posts that the other run does not have, and the posts
  both share (same platform, id, author and words) whose engagement changed most;
- how far each injected event travelled (``engine/sim/travel``);
- a short narrative by the LLM in which every claim cites posts of the run it comes from,
  ``[A twitter post 12]`` / ``[B reddit post 3]``; a citation of a post its run does not have
  is flagged (``engine/sim/compare_narrative``). Without an LLM, or once a budget is reached,
  the comparison is written without the narrative and says why.

Output in ``out_dir``: compare.md, compare.json and charts/activity.png, charts/beliefs.png.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from engine.offload import run_cpu
from engine.sim.beliefs import Beliefs, load_beliefs
from engine.sim.compare_narrative import Narrative, write_narrative
from engine.sim.divergence import shared_rounds
from engine.sim.injected import Injected, read_injected
from engine.sim.report.compare_charts import TITLES, draw_comparison_charts, run_label
from engine.sim.report.stats import ACTIONS_LOG, NOT_ACTIONS, POST_MADE, PostStat, SimStats, compute_stats, read_log
from engine.sim.travel import Travel, event_travel
from engine.words import plural

STANCE_WEIGHT = 4.0
TOP = 5
Progress = Callable[[float, str], Awaitable[None]]


@dataclass
class Run:
    letter: str                      # "A" or "B"
    sim_id: str
    folder: Path
    stats: SimStats
    beliefs: Beliefs
    injected: list[Injected]
    travels: list[Travel]
    acted: dict[int, list[tuple[int, str]]]   # agent id -> (round from 1, action) taken

    @property
    def label(self) -> str:
        return run_label(self.letter, self.sim_id)

    def cite(self, post: PostStat) -> str:
        return f"[{self.letter} {post.platform} post {post.post_id}]"

    def actions_from(self, agent_id: int, from_round: int) -> Counter:
        return Counter(action for rnd, action in self.acted.get(agent_id, []) if rnd >= from_round)

    def total_from(self, from_round: int) -> int:
        return sum(n for platform in self.stats.rounds.values() for r, n in platform.items() if r + 1 >= from_round)


def load_run(letter: str, sim_id: str, folder: Path | str, beliefs: Beliefs) -> Run:
    """Everything compared about one run (blocking)."""
    folder = Path(folder)
    stats = compute_stats(folder)
    injected = read_injected(folder)
    sources = {(e.platform, e.post_id) for e in injected}   # the injection's post is no agent's doing
    acted: dict[int, list[tuple[int, str]]] = {}
    for platform in stats.platforms:
        for a in read_log(folder / platform / ACTIONS_LOG)[0]:
            info = a.get("info") if isinstance(a.get("info"), dict) else {}
            if (a["action"] not in NOT_ACTIONS and a.get("agent_id") is not None
                    and (platform, info.get(POST_MADE.get(a["action"], ""))) not in sources):
                acted.setdefault(int(a["agent_id"]), []).append((a["round"] + 1, a["action"]))
    return Run(letter, sim_id, folder, stats, beliefs, injected, [event_travel(folder, e) for e in injected], acted)


@dataclass
class AgentDiff:
    agent_id: int
    name: str
    a: Counter
    b: Counter
    stance_a: float | None
    stance_b: float | None

    @property
    def score(self) -> float:
        actions = sum(abs(self.a[t] - self.b[t]) for t in set(self.a) | set(self.b))
        stance = abs(self.stance_a - self.stance_b) if None not in (self.stance_a, self.stance_b) else 0.0
        return actions + STANCE_WEIGHT * stance


@dataclass
class Comparison:
    a: Run
    b: Run
    shared: int                                           # rounds played alike from round 1
    agents: list[AgentDiff] = field(default_factory=list)                 # most different first
    own_posts: dict[str, list[PostStat]] = field(default_factory=dict)    # letter -> posts only it has
    changed_posts: list[tuple[PostStat, PostStat]] = field(default_factory=list)   # (in A, in B)

    @property
    def from_round(self) -> int:
        return self.shared + 1

    @property
    def runs(self) -> tuple[Run, Run]:
        return self.a, self.b


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _twin(post: PostStat, other: Run) -> PostStat | None:
    """The same post in the other run: same platform, id, author and words (written before they parted)."""
    twin = other.stats.find_post(post.platform, post.post_id)
    return twin if twin is not None and (twin.author_id, twin.content) == (post.author_id, post.content) else None


def compare_runs(a: Run, b: Run) -> Comparison:
    """What differs between two loaded runs (blocking)."""
    cmp = Comparison(a, b, shared_rounds(a.folder, b.folder, a.injected, b.injected))
    start = cmp.from_round
    names = {x.agent_id: x.name for run in (b, a) for x in run.stats.agents}
    for agent_id in sorted(set(a.acted) | set(b.acted) | set(names)):
        diff = AgentDiff(agent_id, names.get(agent_id, f"agent{agent_id}"), a.actions_from(agent_id, start),
                         b.actions_from(agent_id, start), _mean(a.beliefs.agent_scores(agent_id, start)),
                         _mean(b.beliefs.agent_scores(agent_id, start)))
        if diff.score > 0:
            cmp.agents.append(diff)
    cmp.agents.sort(key=lambda d: (-d.score, d.agent_id))
    for run, other in ((a, b), (b, a)):   # stats.posts are most engaged first
        cmp.own_posts[run.letter] = [p for p in run.stats.posts if _twin(p, other) is None]
    for pa in a.stats.posts:
        if (pb := _twin(pa, b)) is not None and pb.engagement != pa.engagement:
            cmp.changed_posts.append((pa, pb))
    cmp.changed_posts.sort(key=lambda ab: (-abs(ab[1].engagement - ab[0].engagement), ab[0].platform, ab[0].post_id))
    return cmp


# -- writing it up ---------------------------------------------------------------------------

def _mix(counts: Counter) -> str:
    return ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in counts.most_common()) or "nothing"


def _stance(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def where_they_part(cmp: Comparison) -> str:
    last = max(cmp.a.stats.rounds_done, cmp.b.stats.rounds_done)
    if cmp.shared == 0:
        return "The runs differ from round 1: everything is compared from round 1."
    if cmp.shared >= last:
        return f"The runs played all {plural(cmp.shared, 'round')} alike: nothing differs."
    alike = "round 1" if cmp.shared == 1 else f"rounds 1-{cmp.shared}"
    return (f"Both runs played {alike} alike; they part from round {cmp.from_round}, "
            f"and what differs is compared from there.")


def facts(cmp: Comparison) -> dict:
    """The comparison as JSON for the narrative writer; every post carries its citation."""
    start = cmp.from_round
    out: dict = {"runs": {r.letter: r.sim_id for r in cmp.runs}, "compared_from_round": start,
                 "shared_rounds": cmp.shared}
    for r in cmp.runs:
        out[r.letter] = {
            "actions_per_round": {p: {str(k + 1): v for k, v in sorted(rounds.items())}
                                  for p, rounds in r.stats.rounds.items()},
            "actions_from_that_round": r.total_from(start),
            "belief_split": {p: {str(rnd): vars(r.beliefs.split(p, rnd)) for rnd in r.beliefs.rounds(p)}
                             for p in r.beliefs.platforms()},
            "top_posts": [{"cite": r.cite(p), "author": f"@{p.author}", "round": (p.round or 0) + 1,
                           "engagement": p.engagement, "text": _short(p.content, 220)}
                          for p in cmp.own_posts.get(r.letter, [])[:TOP]],
            "injected_events": [{"round": t.event.round, "text": _short(t.event.text, 200),
                                 "cite": f"[{r.letter} {t.event.platform} post {t.event.post_id}]", **t.counts()}
                                for t in r.travels if t.event.post_id is not None],
        }
    out["agents_differing_most"] = [
        {"agent": f"@{d.name}", "A": _mix(d.a), "B": _mix(d.b), "stance_A": d.stance_a, "stance_B": d.stance_b}
        for d in cmp.agents[:TOP]]
    out["shared_posts_engagement_changed"] = [
        {"A": cmp.a.cite(pa), "B": cmp.b.cite(pb), "text": _short(pa.content, 160), "engagement_A": pa.engagement,
         "engagement_B": pb.engagement} for pa, pb in cmp.changed_posts[:TOP]]
    return out


def render(cmp: Comparison, charts: dict[str, Path], narrative: Narrative, out_dir: Path) -> str:
    a, b = cmp.runs
    start = cmp.from_round
    lines = [f"# Comparison: {a.label} and {b.label}", "", where_they_part(cmp), ""]
    lines += ["## Narrative", ""]
    if narrative.text:
        lines += [narrative.text.strip(), ""]
    if narrative.note:
        lines += [f"_{narrative.note}_", ""]
    lines += ["## Activity and beliefs per round", ""]
    for name, path in charts.items():
        lines += [f"![{TITLES[name]}]({Path(path).relative_to(out_dir).as_posix()})", ""]
    platforms = [p for p in ("twitter", "reddit") if p in a.stats.platforms or p in b.stats.platforms]
    last = max(a.stats.rounds_done, b.stats.rounds_done)
    if platforms and last:
        lines += ["| round | " + " | ".join(f"{r.letter} {p}" for p in platforms for r in cmp.runs) + " |",
                  "|---|" + "---|" * (2 * len(platforms))]
        for rnd in range(last):
            cells = []
            for p in platforms:
                for r in cmp.runs:
                    n = r.stats.rounds.get(p, {}).get(rnd)
                    split = r.beliefs.split(p, rnd + 1)
                    belief = f" · {split.for_}/{split.neutral}/{split.against}" if split else ""
                    cells.append("" if n is None else f"{n}{belief}")
            lines.append(f"| {rnd + 1} | " + " | ".join(cells) + " |")
        lines += ["", "Actions per round; with stances tracked, then agents for / neutral / against.", ""]
    lines += [f"## Agents whose behaviour differs most (from round {start})", ""]
    if cmp.agents:
        lines += ["| agent | A | B | stance A | stance B |", "|---|---|---|---|---|"]
        lines += [f"| @{d.name} | {_mix(d.a)} | {_mix(d.b)} | {_stance(d.stance_a)} | {_stance(d.stance_b)} |"
                  for d in cmp.agents[:TOP]]
        lines += ["", f"Matched by agent id; ranked by the actions that differ, type by type, plus "
                      f"{STANCE_WEIGHT:g} × the change of the mean stance score (from -1 against to +1 for).", ""]
    else:
        lines += ["No agent acted differently.", ""]
    lines += ["## Posts that differ", ""]
    for r in cmp.runs:
        posts = cmp.own_posts.get(r.letter, [])[:TOP]
        lines += [f"Most engaged posts only {r.label} has:", ""]
        lines += [f"- {r.cite(p)} @{p.author}, round {(p.round or 0) + 1}, engagement {p.engagement}: "
                  f"\"{_short(p.content)}\"" for p in posts] or ["- none"]
        lines.append("")
    if cmp.changed_posts:
        lines += ["Shared posts whose engagement changed most:", ""]
        lines += [f"- {a.cite(pa)} / {b.cite(pb)} @{pa.author}: engagement {pa.engagement} in A, "
                  f"{pb.engagement} in B: \"{_short(pa.content)}\"" for pa, pb in cmp.changed_posts[:TOP]]
        lines.append("")
    lines += ["## How far the injected events travelled", ""]
    travels = [(r, t) for r in cmp.runs for t in r.travels]
    if travels:
        for r, t in travels:
            lines.append(f"- {r.label}, round {t.event.round}, \"{_short(t.event.text, 120)}\" "
                         f"(by {t.event.source}, asked by {t.event.asked_by or 'unknown'}): {t.describe()}")
        lines.append("")
    else:
        lines += ["Neither run had an injected event.", ""]
    if narrative.cited:
        lines += ["## Sources", ""]
        lines += [f"- {c} {narrative.sources.get(c, '⚠ not a post of that simulation')}" for c in narrative.cited]
        lines.append("")
    return "\n".join(lines)


def summary(cmp: Comparison, narrative: Narrative) -> str:
    a, b = cmp.runs
    start = cmp.from_round
    parts = [f"⚖ Comparison of {a.label} and {b.label}. {where_they_part(cmp)}",
             f"Actions from round {start}: {plural(a.total_from(start), 'action')} in A, "
             f"{plural(b.total_from(start), 'action')} in B."]
    for r in cmp.runs:
        for t in r.travels:
            parts.append(f"Event in {r.letter} (round {t.event.round}) {t.describe()}.")
    if cmp.agents:
        d = cmp.agents[0]
        parts.append(f"Most changed agent: @{d.name} (A: {_mix(d.a)}; B: {_mix(d.b)}).")
    parts.append(_short(narrative.text, 700) if narrative.text else narrative.note)
    return "\n".join(p for p in parts if p)


@dataclass
class CompareResult:
    path: Path
    summary: str
    charts: dict[str, Path]
    citations: list[str]
    unverified: list[str]
    from_round: int


async def compare_simulations(db, llm, a: tuple[str, Path], b: tuple[str, Path], out_dir: Path | str, *,
                              job: str | None = None, scope: str | None = None,
                              progress: Progress | None = None) -> CompareResult:
    """Compare run A = (sim id, folder) with run B and write the comparison into ``out_dir``.

    ``llm`` may be None: the comparison is then written without the narrative."""
    async def step(fraction: float, message: str) -> None:
        if progress is not None:
            await progress(fraction, message)

    out = Path(out_dir)
    await step(0.05, "reading both runs")
    runs = [await run_cpu(load_run, letter, sim_id, folder, await load_beliefs(db, sim_id))
            for letter, (sim_id, folder) in (("A", a), ("B", b))]
    cmp = await run_cpu(compare_runs, *runs)
    await step(0.4, "drawing the charts")
    injected = {r.letter: [e.round for e in r.injected] for r in cmp.runs}
    charts = await run_cpu(draw_comparison_charts, out / "charts",
                           {r.letter: (r.sim_id, r.stats.rounds) for r in cmp.runs},
                           {r.letter: (r.sim_id, r.beliefs) for r in cmp.runs}, cmp.from_round, injected)
    await step(0.6, "writing the narrative" if llm is not None else "writing the comparison")
    data = facts(cmp)
    narrative = await write_narrative(llm, cmp, data, job=job, scope=scope)
    await step(0.95, "writing compare.md")
    path = out / "compare.md"
    path.write_text(render(cmp, charts, narrative, out), encoding="utf-8")
    text = summary(cmp, narrative)
    (out / "compare.json").write_text(json.dumps({
        "a": a[0], "b": b[0], "from_round": cmp.from_round, "shared_rounds": cmp.shared, "summary": text,
        "charts": {k: str(v) for k, v in charts.items()}, "citations": narrative.cited,
        "unverified_citations": narrative.unverified, "facts": data}, indent=2), encoding="utf-8")
    return CompareResult(path, text, charts, narrative.cited, narrative.unverified, cmp.from_round)
