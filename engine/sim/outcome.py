"""Outcomes: what really happened, recorded after a simulation, and its forecast scored against it.

``/sim outcome <id> <what happened>`` records the outcome (``record``; table ``sim_outcomes``, its
SQL all here) and has the report agent score the forecast (``score``, a job: one structured LLM
call, two when the first answer cites nothing). The agent is shown the outcome, the report's
summary when there is one, and each run's evidence: its belief split per round (both platforms
together, rounds from 1), where it ended, and its most engaged posts with their citations
(``[twitter post 12]``, or ``[run 3 twitter post 12]`` in an ensemble). It answers ``Verdict``:

- ``score``: the forecast overall on the stated scale (``SCALE``: 0 = wrong on everything that
  mattered, 10 = foresaw what happened), and ``runs``: each run's score with its reason;
- ``right`` and ``wrong``: what the forecast got right and wrong, each point citing the posts or
  rounds it rests on;
- ``summary``: two sentences.

Content checks (engine.llm.content_checks) reject junk text; scores are clamped to the scale; a
run number it does not have is dropped; a citation of a post its run does not have, or a round
past the last one, is marked "⚠ unverified" and listed, as the report does. A new outcome for
the same simulation replaces the old one and is scored again.

``track_record``: how many of a chat's simulations are scored and their mean score (``/sims``);
``scored_since``: those scored since a time (the daily digest). Both as a ``Viewer`` sees them.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine import i18n, language
from engine.db import Database
from engine.i18n import _
from engine.jobs import JobError, utcnow
from engine.llm.content_checks import ContentChecks
from engine.memory.audience import Viewer
from engine.offload import run_cpu
from engine.sim.ensemble.spread import CAMP_WORDS, camp_of, combine
from engine.sim.records import SimListing, SimRecord, seen_by
from engine.sim.report.agent import CITATION, report_dir
from engine.sim.report.stats import compute_stats
from engine.sim.stance.tracking import split_by_round
from engine.words import plural

SCALE = 10
SCALE_TEXT = f"0-{SCALE}: 0 = wrong on everything that mattered, {SCALE} = foresaw what happened"
MAX_OUTCOME_CHARS = 2000
TOP_POSTS = 5
ROUND = re.compile(r"\bround (\d+)\b", re.I)
UNVERIFIED = " ⚠ unverified"

SYSTEM = f"""You score a social-media simulation's forecast against what really happened.
The simulation was run to answer a requirement; you are given what really happened, the report's
summary, and for each run its belief split per round (for / neutral / against the requirement's
subject), how it ended and its most engaged posts with their citations.
Score on the scale {SCALE_TEXT}. Give: score (overall), runs (one entry per run: its number, its
score on the same scale, the reason in one sentence), right (what the forecast got right) and wrong
(what it got wrong), each point one sentence that cites the posts, as given (e.g. [twitter post 12]
or [run 2 reddit post 3]), or the rounds (e.g. round 6) it rests on, and summary (two sentences).
Cite only posts and rounds listed. Judge the forecast, not the real events."""


class RunScore(BaseModel):
    run: int
    score: int
    reason: str


class Verdict(BaseModel):
    score: int
    summary: str
    right: list[str]
    wrong: list[str]
    runs: list[RunScore]


CHECKS = ContentChecks(texts=("summary", "right[]", "wrong[]", "runs[].reason"))


@dataclass
class Scoring:
    """A scored forecast, as stored (``sim_outcomes.scoring``) and shown."""
    score: int
    summary: str
    right: list[str]
    wrong: list[str]
    runs: list[dict]                     # {"run", "score", "reason"}
    cited: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    scale: int = SCALE

    def describe(self, sim_id: str) -> str:
        lines = ["🎯 " + _("Forecast of `{sim}` scored {score}/{scale} (0-{scale}: 0 = wrong on everything that "
                           "mattered, {scale} = foresaw what happened).", sim=sim_id, score=self.score,
                           scale=self.scale), self.summary]
        if self.right:
            lines += ["✅ " + _("Right:")] + [f"• {x}" for x in self.right]
        if self.wrong:
            lines += ["❌ " + _("Wrong:")] + [f"• {x}" for x in self.wrong]
        if len(self.runs) > 1:
            lines.append(_("Per run: {runs}", runs="; ".join(
                _("run {run} {score}/{scale} ({reason})", run=r["run"], score=r["score"], scale=self.scale,
                  reason=r["reason"]) for r in self.runs)))
        if self.unverified:
            lines.append("⚠ " + _("Unverified: {cites} (no post or round of the simulation)",
                                  cites=", ".join(self.unverified)))
        return "\n".join(lines)


@dataclass
class Outcome:
    sim_id: str
    outcome: str
    recorded_by: str
    recorded_at: str
    scoring: Scoring | None
    scored_at: str | None


# -- storage -----------------------------------------------------------------------------------

async def record(db: Database, sim_id: str, outcome: str, recorded_by: str) -> str:
    """Record (or replace) what really happened; the text as kept. JobError for bad text."""
    text = " ".join((outcome or "").split())
    if not text:
        raise JobError(_("say what really happened: the outcome is empty"))
    if len(text) > MAX_OUTCOME_CHARS:
        raise JobError(_("the outcome is {n} characters long; say it in at most {most}", n=i18n.number(len(text)),
                         most=i18n.number(MAX_OUTCOME_CHARS)))
    await db.execute(
        "INSERT INTO sim_outcomes(sim_id, outcome, recorded_by, recorded_at) VALUES (?,?,?,?)"
        " ON CONFLICT(sim_id) DO UPDATE SET outcome=excluded.outcome, recorded_by=excluded.recorded_by,"
        " recorded_at=excluded.recorded_at, score=NULL, scoring=NULL, scored_at=NULL",
        (sim_id, text, recorded_by, utcnow()))
    return text


async def get(db: Database, sim_id: str) -> Outcome | None:
    row = await db.fetchone("SELECT * FROM sim_outcomes WHERE sim_id=?", (sim_id,))
    if row is None:
        return None
    scoring = Scoring(**json.loads(row["scoring"])) if row["scoring"] else None
    return Outcome(row["sim_id"], row["outcome"], row["recorded_by"], row["recorded_at"], scoring, row["scored_at"])


async def _store(db: Database, sim_id: str, scoring: Scoring) -> None:
    await db.execute("UPDATE sim_outcomes SET score=?, scoring=?, scored_at=? WHERE sim_id=?",
                     (float(scoring.score), json.dumps(asdict(scoring)), utcnow(), sim_id))


@dataclass(frozen=True)
class TrackRecord:
    scored: int
    mean: float | None


async def track_record(db: Database, viewer: Viewer) -> TrackRecord:
    """The scored simulations ``viewer`` may see (ensembles as one) and their mean score."""
    seen, params = seen_by(viewer, "s.")
    row = await db.fetchone(
        "SELECT count(o.score) AS n, avg(o.score) AS mean FROM sim_outcomes o JOIN simulations s ON s.id = o.sim_id"
        f" WHERE o.score IS NOT NULL AND s.ensemble_of IS NULL AND {seen}", params)
    return TrackRecord(int(row["n"]), float(row["mean"]) if row["mean"] is not None else None)


async def scored_since(db: Database, viewer: Viewer, since: str) -> list[tuple[str, str, float]]:
    """(sim id, requirement, score) of the simulations ``viewer`` may see scored since ``since``."""
    seen, params = seen_by(viewer, "s.")
    rows = await db.fetchall(
        "SELECT s.id, s.requirement, o.score FROM sim_outcomes o JOIN simulations s ON s.id = o.sim_id"
        f" WHERE o.scored_at >= ? AND o.score IS NOT NULL AND {seen} ORDER BY o.scored_at", (since, *params))
    return [(r["id"], r["requirement"], r["score"]) for r in rows]


def score_text(row: SimListing) -> str:
    """' · scored 7/10' for a /sims line ('' when no outcome; ' · outcome being scored')."""
    if row.score is not None:
        return " · " + _("scored {score}/{scale}", score=f"{row.score:g}", scale=SCALE)
    return " · " + _("outcome being scored") if row.outcome else ""


def track_record_line(record: TrackRecord) -> str:
    if not record.scored:
        return _("Track record: no forecast scored yet (/sim outcome <id> <what happened> scores one).")
    return _("Track record: {forecasts} scored, mean {mean}/{scale}.",
             forecasts=plural(record.scored, "{n} forecast", "{n} forecasts"), mean=f"{record.mean:.1f}",
             scale=SCALE)


# -- the evidence and the verdict -----------------------------------------------------------------

@dataclass
class _Run:
    number: int
    sim_id: str
    folder: Path
    rounds: int = 0
    lines: list[str] = field(default_factory=list)
    posts: dict[str, str] = field(default_factory=dict)   # citation -> "@author: text"


def _posts(folder: Path, prefix: str) -> tuple[dict[str, str], int]:
    """The run's most engaged posts (citation -> what the agent is shown) and its rounds done."""
    stats = compute_stats(folder)
    return {f"[{prefix}{p.platform} post {p.post_id}]": f"@{p.author} (round {(p.round or 0) + 1}, "
            f"engagement {p.engagement}): {' '.join(p.content.split())[:240]}"
            for p in stats.posts[:TOP_POSTS]}, stats.rounds_done


async def _evidence(db: Database, runs: list[tuple[int, str, Path]]) -> list[_Run]:
    out = []
    ensemble = len(runs) > 1
    for number, sim_id, folder in runs:
        run = _Run(number, sim_id, folder)
        splits = combine(await split_by_round(db, sim_id))
        run.rounds = max(splits, default=0)
        if splits:
            run.lines.append("belief per round (for/neutral/against, mean score): " + "; ".join(
                f"round {r} {s.for_}/{s.neutral}/{s.against} {s.mean:+.2f}" for r, s in splits.items()))
            run.lines.append(f"ended: most agents {CAMP_WORDS[camp_of(splits[run.rounds])]} in round {run.rounds}")
        else:
            run.lines.append("beliefs were not tracked in this run")
        run.posts, done = await run_cpu(_posts, folder, f"run {number} " if ensemble else "")
        run.rounds = max(run.rounds, done)
        out.append(run)
    return out


def _messages(sim: SimRecord, outcome: str, summary: str, confidence: str, runs: list[_Run]) -> list[dict]:
    parts = [f"Requirement: {sim.requirement}", f"What really happened: {outcome}"]
    if summary:
        parts.append(f"The report's summary: {summary}")
    if confidence:
        parts.append(f"Across the {len(runs)} runs: {confidence}")
    for r in runs:
        parts.append(f"\nRun {r.number}:\n" + "\n".join(r.lines))
        parts += [f"- {cite} {text}" for cite, text in r.posts.items()]
    # the summary, what it got right and wrong and each run's reason, in the simulation's language
    return [{"role": "system", "content": f"{SYSTEM}\n{language.answer_in(sim.spec.language)}"},
            {"role": "user", "content": "\n".join(parts)}]


def _cited(texts: list[str]) -> list[str]:
    found = []
    for text in texts:
        found += CITATION.findall(text) + [m.group(0).lower() for m in ROUND.finditer(text)]
    return list(dict.fromkeys(found))


def _check(verdict: Verdict, runs: list[_Run]) -> Scoring:
    """The verdict clamped to the scale and the runs, its citations checked against the evidence."""
    known = {c for r in runs for c in r.posts}
    last = max((r.rounds for r in runs), default=0)
    numbers = {r.number for r in runs}
    unverified: list[str] = []

    def mark(text: str) -> str:
        def post(m: re.Match) -> str:
            cite = m.group(0)
            if cite in known or not cite.endswith("]") or "post" not in cite:
                return cite
            unverified.append(cite)
            return cite + UNVERIFIED

        def rnd(m: re.Match) -> str:
            if 1 <= int(m.group(1)) <= last:
                return m.group(0)
            unverified.append(m.group(0).lower())
            return m.group(0) + UNVERIFIED
        return ROUND.sub(rnd, CITATION.sub(post, text.strip()))

    def clamp(n: int) -> int:
        return max(0, min(SCALE, int(n)))

    per_run: list[dict[str, Any]] = []
    seen: set = set()
    for r in verdict.runs:
        if r.run in numbers and r.run not in seen:
            seen.add(r.run)
            per_run.append({"run": r.run, "score": clamp(r.score), "reason": mark(r.reason)})
    right, wrong = [mark(x) for x in verdict.right if x.strip()], [mark(x) for x in verdict.wrong if x.strip()]
    return Scoring(clamp(verdict.score), verdict.summary.strip(), right, wrong, sorted(per_run, key=lambda x: x["run"]),
                   _cited(right + wrong + [r["reason"] for r in per_run]), list(dict.fromkeys(unverified)))


async def score(db: Database, llm, sim: SimRecord, runs: list[tuple[int, str, Path]], *, confidence: str = "",
                job: str | None = None, scope: str | None = None) -> Scoring:
    """Score ``sim``'s forecast against its recorded outcome (``runs``: (number, id, folder) of
    each run that ran) and store the scoring. JobError when there is no outcome or no run."""
    recorded = await get(db, sim.id)
    if recorded is None:
        raise JobError(_("simulation {sim} has no recorded outcome", sim=sim.id))
    if not runs:
        raise JobError(_("simulation {sim} has not run yet: there is no forecast to score", sim=sim.id))
    evidence = await _evidence(db, runs)
    path = report_dir(sim.folder) / "summary.txt"
    summary = await run_cpu(path.read_text, encoding="utf-8") if path.exists() else ""
    messages = _messages(sim, recorded.outcome, summary, confidence, evidence)
    verdict = await llm.structured(Verdict, messages, job=job, scope=scope, checks=CHECKS)
    if not _cited(verdict.right + verdict.wrong):   # asked once more: every point must rest on something
        messages += [{"role": "assistant", "content": verdict.model_dump_json()},
                     {"role": "user", "content": "No point of right or wrong cites a post or a round. Answer "
                                                 "again, each point citing the posts or rounds it rests on."}]
        verdict = await llm.structured(Verdict, messages, job=job, scope=scope, checks=CHECKS)
    scoring = _check(verdict, evidence)
    await _store(db, sim.id, scoring)
    return scoring
