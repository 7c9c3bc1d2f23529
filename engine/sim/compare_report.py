"""The comparison written up: compare.md, the chat summary and the facts the narrative is
written from (every post with its citation, ``[A twitter post 12]``)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from engine.sim.compare_narrative import Narrative
from engine.sim.compare_runs import STANCE_WEIGHT, Comparison
from engine.sim.report.compare_charts import TITLES
from engine.words import plural

TOP = 5   # agents and posts listed per table


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
