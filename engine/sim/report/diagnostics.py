"""Quality diagnostics of a run, in every report: can its outcome be trusted, and what to change.

- participation: agents who acted (any action but doing nothing) / agents of the simulation;
- stance entropy per round and platform: Shannon entropy of the for / neutral / against split,
  divided by log2(3), so 0 = everyone in one camp and 1 = evenly split;
- round of convergence: the first round after which the split (as shares of the agents
  classified) changes by no more than ``CONVERGED`` between any two later rounds, if any;
- cross-platform interaction: agents who acted on both platforms, and of those classified on
  both, how many hold the same label on both in their latest round there;
- steps skipped or failed: ``step_skipped`` lines / agent steps taken (``round_end`` llm_steps);
- a one-line health verdict naming what to change (more rounds, more agents, a more contested
  requirement, a better model when many steps were skipped or agents stayed silent).

The maths are free functions over plain values (tested on synthetic rows); ``read_facts`` reads
the run's files (blocking: call through run_cpu). The verdict and the section are written in the
current language (engine.i18n: the report job's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from engine.i18n import N_, _, percent
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.run.output import ACTION, PLATFORMS, ROUND_END, STEP_SKIPPED, actions_log, is_visible, log_rows
from engine.sim.stance.tracking import RoundSplit, label_of, rounds_named, stance_name
from engine.words import plural

CONVERGED = 0.10        # largest change of a camp's share between rounds that counts as settled
LOW_PARTICIPATION = 0.5
MANY_SKIPPED = 0.2
SILENT = 0.2            # acted / steps below this: agents mostly answered without acting
FEW_ROUNDS, FEW_AGENTS = 4, 6
CONSENSUS = 0.35        # normalised entropy below this in the last round: one camp dominates


@dataclass
class RunFacts:
    """What a run's logs say, per platform."""
    agents: dict[str, set[int]] = field(default_factory=dict)   # agents on the platform
    acted: dict[str, set[int]] = field(default_factory=dict)    # agents who did something visible
    actions: dict[str, int] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)         # agent LLM steps taken
    skipped: dict[str, int] = field(default_factory=dict)       # of them skipped (unusable or failed)
    rounds: dict[str, int] = field(default_factory=dict)        # rounds completed


def _agents(folder: Path) -> list:
    path = Path(folder) / CONFIG_FILE
    return SimulationConfig.model_validate_json(path.read_text(encoding="utf-8")).agents if path.exists() else []


def read_facts(folder: Path | str) -> RunFacts:
    folder = Path(folder)
    agents = _agents(folder)
    facts = RunFacts()
    for platform in PLATFORMS:
        path = actions_log(folder, platform)
        if not path.exists():
            continue
        facts.agents[platform] = {a.agent_id for a in agents if platform in a.platforms}
        acted, actions, steps, skipped, rounds = set(), 0, 0, 0, 0
        for row in log_rows(path):
            kind = row.get("type")
            if kind == ACTION and is_visible(str(row.get("action", ""))):
                actions += 1
                if isinstance(row.get("agent_id"), int):
                    acted.add(row["agent_id"])
            elif kind == STEP_SKIPPED:
                skipped += 1
            elif kind == ROUND_END:
                steps += int(row.get("llm_steps") or 0)
                rounds = max(rounds, int(row.get("round", -1)) + 1)
        facts.acted[platform], facts.actions[platform] = acted, actions
        facts.steps[platform], facts.skipped[platform], facts.rounds[platform] = steps, skipped, rounds
    return facts


# -- the maths --------------------------------------------------------------------------------

def entropy(for_: int, neutral: int, against: int) -> float:
    """Normalised Shannon entropy of a split: 0 one camp, 1 evenly split in three."""
    total = for_ + neutral + against
    if total == 0:
        return 0.0
    h = -sum(n / total * math.log2(n / total) for n in (for_, neutral, against) if n)
    return h / math.log2(3)


def shares(split: RoundSplit) -> tuple[float, float, float]:
    total = split.total or 1
    return split.for_ / total, split.neutral / total, split.against / total


def convergence_round(splits: list[RoundSplit], threshold: float = CONVERGED) -> int | None:
    """The first round after which no camp's share moves by more than ``threshold`` from one
    round to the next, until the last round; None when the split still moves at the end or
    there are fewer than two rounds. ``splits``: one platform's, in round order."""
    if len(splits) < 2:
        return None
    settled = None
    for before, after in zip(splits, splits[1:]):
        moved = max(abs(a - b) for a, b in zip(shares(before), shares(after)))
        if moved > threshold + 1e-9:   # a share of exactly the threshold is settled
            settled = None
        elif settled is None:
            settled = before.round
    return settled


def cross_platform(acted: dict[str, set[int]], scores: list[tuple[str, int, int, float]]) -> tuple[int, int, int]:
    """(agents who acted on both platforms, agents classified on both, of them agreeing in label)."""
    both = len(set.intersection(*acted.values())) if len(acted) > 1 else 0
    latest: dict[tuple[str, int], tuple[int, float]] = {}
    for platform, rnd, agent, score in scores:
        if latest.get((platform, agent), (-1, 0.0))[0] < rnd:
            latest[(platform, agent)] = (rnd, score)
    platforms = sorted({p for p, _ in latest})
    if len(platforms) < 2:
        return both, 0, 0
    first, second = platforms[:2]
    common = [a for p, a in latest if p == first and (second, a) in latest]
    agree = sum(1 for a in common if label_of(latest[(first, a)][1]) == label_of(latest[(second, a)][1]))
    return both, len(common), agree


# -- the diagnosis ----------------------------------------------------------------------------

@dataclass
class Diagnostics:
    agents: int
    acted: int
    participation: float
    entropy: dict[str, list[tuple[int, float]]]     # platform -> (round, normalised entropy)
    convergence: dict[str, int | None]
    both_platforms: int
    classified_on_both: int
    agreeing: int
    steps: int
    skipped: int
    rounds: int
    actions: int
    verdict: str


def verdict(d: Diagnostics) -> str:
    """One line: healthy, or what is wrong and what to change."""
    problems, changes = [], []
    poor = False   # the model failed the run (silent agents, skipped steps), not only its size
    if d.steps and d.actions < SILENT * d.steps:
        problems.append(_("the agents stayed mostly silent ({actions} in {steps})",
                          actions=plural(d.actions, "{n} action", "{n} actions"),
                          steps=plural(d.steps, "{n} agent step", "{n} agent steps")))
        changes.append(N_("a better model (one that answers with tool calls)"))
        poor = True
    if d.steps and d.skipped > MANY_SKIPPED * d.steps:
        problems.append(_("{share} of agent steps were skipped or failed", share=percent(d.skipped / d.steps)))
        if not changes:
            changes.append(N_("a better model (or a reachable, less loaded endpoint)"))
        poor = True
    if d.agents and d.participation < LOW_PARTICIPATION:
        problems.append(_("only {acted} of {agents} acted", acted=d.acted,
                          agents=plural(d.agents, "{n} agent", "{n} agents")))
        changes.append(N_("more rounds"))
    elif d.rounds < FEW_ROUNDS:
        problems.append(_("only {rounds} ran", rounds=plural(d.rounds, "{n} round", "{n} rounds")))
        changes.append(N_("more rounds"))
    if d.agents < FEW_AGENTS:
        problems.append(_("only {agents} took part", agents=plural(d.agents, "{n} agent", "{n} agents")))
        changes.append(N_("more agents"))
    last = [series[-1][1] for series in d.entropy.values() if series]
    if last and max(last) < CONSENSUS and not problems:
        settled = [r for r in d.convergence.values() if r is not None]
        problems.append(_("beliefs settled into near-consensus from round {round} on", round=min(settled))
                        if settled else _("beliefs settled into near-consensus"))
        changes.append(N_("a more contested requirement"))
    if not d.entropy and not problems:
        problems.append(_("no beliefs were tracked"))
        changes.append("[simulation] track_stances = true")
    if not problems:
        return _("Health: good: agents took part, beliefs stayed contested and few steps were skipped.")
    todo = ", ".join(_(change) for change in dict.fromkeys(changes))
    if poor:
        return _("Health: poor: {problems}. Try {changes}.", problems="; ".join(problems), changes=todo)
    return _("Health: weak: {problems}. Try {changes}.", problems="; ".join(problems), changes=todo)


def diagnose(facts: RunFacts, splits: list[RoundSplit], scores: list[tuple[str, int, int, float]]) -> Diagnostics:
    agents = set().union(*facts.agents.values()) if facts.agents else set()
    acted = set().union(*facts.acted.values()) if facts.acted else set()
    by_platform: dict[str, list[RoundSplit]] = {}
    for s in splits:
        by_platform.setdefault(s.platform, []).append(s)
    both, common, agree = cross_platform(facts.acted, scores)
    d = Diagnostics(agents=len(agents), acted=len(acted & agents) if agents else len(acted),
                    participation=len(acted & agents) / len(agents) if agents else 0.0,
                    entropy={p: [(s.round, entropy(s.for_, s.neutral, s.against)) for s in ss]
                             for p, ss in by_platform.items()},
                    convergence={p: convergence_round(ss) for p, ss in by_platform.items()},
                    both_platforms=both, classified_on_both=common, agreeing=agree,
                    steps=sum(facts.steps.values()), skipped=sum(facts.skipped.values()),
                    rounds=max(facts.rounds.values(), default=0), actions=sum(facts.actions.values()),
                    verdict="")
    d.verdict = verdict(d)
    return d


def markdown(d: Diagnostics, splits: list[RoundSplit]) -> str:
    """The report's "Beliefs and run quality" section body."""
    lines = []
    if splits:
        head = [_("platform"), _("round"), *map(stance_name, ("for", "neutral", "against")), _("mean"), _("entropy")]
        lines += ["| " + " | ".join(head) + " |", "|---|---|---|---|---|---|---|"]
        ent = {(p, r): e for p, series in d.entropy.items() for r, e in series}
        lines += [f"| {s.platform} | {s.round} | {s.for_} | {s.neutral} | {s.against} | {s.mean:+.2f} | "
                  f"{ent[(s.platform, s.round)]:.2f} |" for s in splits]
        lines.append("")
        for platform, rnd in d.convergence.items():
            lines.append(f"- {platform}: " + (_("the split settled after round {round} (no camp moved more than "
                                                "{share} of the agents from one round to the next)", round=rnd,
                                                share=percent(CONVERGED))
                                              if rnd is not None else _("the split had not settled by the last round")))
    else:
        lines.append("- " + _("No beliefs were tracked for this run."))
    lines.append("- " + _("Participation: {acted} of {agents} acted ({share}); {actions} in {steps}.", acted=d.acted,
                          agents=plural(d.agents, "{n} agent", "{n} agents"), share=percent(d.participation),
                          actions=plural(d.actions, "{n} action", "{n} actions"),
                          steps=plural(d.steps, "{n} agent step", "{n} agent steps")))
    both = plural(d.both_platforms, "{n} agent", "{n} agents")
    if d.classified_on_both:
        lines.append("- " + _("Cross-platform: {agents} acted on both platforms; of the {classified} classified on "
                              "both, {agreeing} held the same stance on both.", agents=both, agreeing=d.agreeing,
                              classified=plural(d.classified_on_both, "{n} agent", "{n} agents")))
    else:
        lines.append("- " + _("Cross-platform: {agents} acted on both platforms.", agents=both))
    lines.append("- " + (_("Steps skipped or failed: {skipped} of {steps} ({share}).", skipped=d.skipped, steps=d.steps,
                           share=percent(d.skipped / d.steps)) if d.steps
                         else _("Steps skipped or failed: {skipped} of {steps}.", skipped=d.skipped, steps=d.steps)))
    lines += ["", f"**{d.verdict}**"]
    return "\n".join(lines)


# -- the report's section ---------------------------------------------------------------------

SECTION_TITLE = N_("Beliefs and run quality")   # translated where the report is written


def _roster(folder: Path) -> dict[str, list[tuple[int, str]]]:
    agents = _agents(folder)
    return {p: [(a.agent_id, a.username) for a in agents if p in a.platforms] for p in PLATFORMS}


async def report_section(db, sim_id: str, folder: Path, charts_dir: Path | None) -> tuple[dict[str, Path], str]:
    """The belief chart and replay drawn into ``charts_dir`` (name -> path; None: none drawn) and
    the section's Markdown: the split per round, the diagnostics and the health verdict."""
    from engine.offload import run_cpu
    from engine.sim.inject.logged import injected_events
    from engine.sim.report.belief_charts import draw_beliefs
    from engine.sim.stance.tracking import agent_scores, skipped_rounds, split_by_round

    splits, scores = await split_by_round(db, sim_id), await agent_scores(db, sim_id)
    facts = await run_cpu(read_facts, folder)
    injected = await run_cpu(injected_events, folder)
    charts = (await run_cpu(draw_beliefs, splits, scores, await run_cpu(_roster, folder), charts_dir, injected)
              if splits and charts_dir is not None else {})
    text = markdown(diagnose(facts, splits, scores), splits)
    if skipped := await skipped_rounds(db, sim_id):
        text = _("Stances were not classified for {where}: {reason}.", where=", ".join(rounds_named(skipped)),
                 reason=skipped[-1][2]) + f"\n\n{text}"
    return charts, text
