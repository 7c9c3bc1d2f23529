"""The comparison written up: compare.md, the chat summary and the facts the narrative is
written from (every post with its citation, ``[A twitter post 12]``). compare.md and the summary
are in the current language (engine.i18n: the compare job's); the facts, for the LLM, stay English.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from engine.i18n import _
from engine.sim.compare.charts import TITLES
from engine.sim.compare.narrative import Narrative
from engine.sim.compare.runs import STANCE_WEIGHT, Comparison
from engine.sim.stance.tracking import stance_name
from engine.words import plural

TOP = 5   # agents and posts listed per table


def _mix(counts: Counter, english: bool = False) -> str:
    """Actions by type ("3 create post, 1 like post"); ``english``: for the LLM's facts."""
    nothing = "nothing" if english else _("nothing")
    return ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in counts.most_common()) or nothing


def _stance(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def where_they_part(cmp: Comparison) -> str:
    last = max(cmp.a.stats.rounds_done, cmp.b.stats.rounds_done)
    if cmp.shared == 0:
        return _("The runs differ from round 1: everything is compared from round 1.")
    if cmp.shared >= last:
        return plural(cmp.shared, "The runs played their {n} round alike: nothing differs.",
                      "The runs played all {n} rounds alike: nothing differs.")
    alike = _("round 1") if cmp.shared == 1 else _("rounds 1-{last}", last=cmp.shared)
    return _("Both runs played {alike} alike; they part from round {round}, and what differs is compared from "
             "there.", alike=alike, round=cmp.from_round)


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
        {"agent": f"@{d.name}", "A": _mix(d.a, english=True), "B": _mix(d.b, english=True), "stance_A": d.stance_a,
         "stance_B": d.stance_b}
        for d in cmp.agents[:TOP]]
    out["shared_posts_engagement_changed"] = [
        {"A": cmp.a.cite(pa), "B": cmp.b.cite(pb), "text": _short(pa.content, 160), "engagement_A": pa.engagement,
         "engagement_B": pb.engagement} for pa, pb in cmp.changed_posts[:TOP]]
    return out


def render(cmp: Comparison, charts: dict[str, Path], narrative: Narrative, out_dir: Path,
           wholes: list[str] | tuple = ()) -> str:
    """compare.md; ``wholes``: the part on the sides as wholes, when one is an ensemble."""
    a, b = cmp.runs
    start = cmp.from_round
    lines = ["# " + _("Comparison: {a} and {b}", a=a.label, b=b.label), "", *wholes, where_they_part(cmp), ""]
    lines += ["## " + _("Narrative"), ""]
    if narrative.text:
        lines += [narrative.text.strip(), ""]
    if narrative.note:
        lines += [f"_{narrative.note}_", ""]
    lines += ["## " + _("Activity and beliefs per round"), ""]
    for name, path in charts.items():
        lines += [f"![{_(TITLES[name])}]({Path(path).relative_to(out_dir).as_posix()})", ""]
    platforms = [p for p in ("twitter", "reddit") if p in a.stats.platforms or p in b.stats.platforms]
    last = max(a.stats.rounds_done, b.stats.rounds_done)
    if platforms and last:
        lines += ["| " + _("round") + " | " + " | ".join(f"{r.letter} {p}" for p in platforms for r in cmp.runs)
                  + " |",
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
        lines += ["", _("Actions per round; with stances tracked, then agents {camps}.",
                        camps=" / ".join(map(stance_name, ("for", "neutral", "against")))), ""]
    lines += ["## " + _("Agents whose behaviour differs most (from round {round})", round=start), ""]
    if cmp.agents:
        lines += ["| " + " | ".join([_("agent"), "A", "B", _("stance {run}", run="A"), _("stance {run}", run="B")])
                  + " |",
                  "|---|---|---|---|---|"]
        lines += [f"| @{d.name} | {_mix(d.a)} | {_mix(d.b)} | {_stance(d.stance_a)} | {_stance(d.stance_b)} |"
                  for d in cmp.agents[:TOP]]
        lines += ["", _("Matched by agent id; ranked by the actions that differ, type by type, plus {weight} × the "
                        "change of the mean stance score (from -1 against to +1 for).", weight=f"{STANCE_WEIGHT:g}"),
                  ""]
    else:
        lines += [_("No agent acted differently."), ""]
    lines += ["## " + _("Posts that differ"), ""]
    for r in cmp.runs:
        posts = cmp.own_posts.get(r.letter, [])[:TOP]
        lines += [_("Most engaged posts only {run} has:", run=r.label), ""]
        lines += ["- " + _("{cite} @{author}, round {round}, engagement {engagement}: \"{text}\"", cite=r.cite(p),
                           author=p.author, round=(p.round or 0) + 1, engagement=p.engagement,
                           text=_short(p.content)) for p in posts] or ["- " + _("none")]
        lines.append("")
    if cmp.changed_posts:
        lines += [_("Shared posts whose engagement changed most:"), ""]
        lines += ["- " + _("{a} / {b} @{author}: engagement {engagement_a} in A, {engagement_b} in B: \"{text}\"",
                           a=a.cite(pa), b=b.cite(pb), author=pa.author, engagement_a=pa.engagement,
                           engagement_b=pb.engagement, text=_short(pa.content)) for pa, pb in cmp.changed_posts[:TOP]]
        lines.append("")
    lines += ["## " + _("How far the injected events travelled"), ""]
    travels = [(r, t) for r in cmp.runs for t in r.travels]
    if travels:
        for r, t in travels:
            lines.append("- " + _("{run}, round {round}, \"{text}\" (by {source}, asked by {person}): {travel}",
                                  run=r.label, round=t.event.round, text=_short(t.event.text, 120),
                                  source=t.event.source, person=t.event.asked_by or _("unknown"),
                                  travel=t.describe()))
        lines.append("")
    else:
        lines += [_("Neither run had an injected event."), ""]
    if narrative.cited:
        lines += ["## " + _("Sources"), ""]
        unknown = _("⚠ not a post of that simulation")
        lines += [f"- {c} {narrative.sources.get(c) or unknown}" for c in narrative.cited]
        lines.append("")
    return "\n".join(lines)


def summary(cmp: Comparison, narrative: Narrative) -> str:
    a, b = cmp.runs
    start = cmp.from_round
    parts = [_("⚖ Comparison of {a} and {b}.", a=a.label, b=b.label) + " " + where_they_part(cmp),
             _("Actions from round {round}: {a} in A, {b} in B.", round=start,
               a=plural(a.total_from(start), "{n} action", "{n} actions"),
               b=plural(b.total_from(start), "{n} action", "{n} actions"))]
    for r in cmp.runs:
        for t in r.travels:
            parts.append(_("Event in {run} (round {round}) {travel}.", run=r.letter, round=t.event.round,
                           travel=t.describe()))
    if cmp.agents:
        d = cmp.agents[0]
        parts.append(_("Most changed agent: @{agent} (A: {a}; B: {b}).", agent=d.name, a=_mix(d.a), b=_mix(d.b)))
    parts.append(_short(narrative.text, 700) if narrative.text else narrative.note)
    return "\n".join(p for p in parts if p)
