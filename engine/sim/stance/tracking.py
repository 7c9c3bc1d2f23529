"""Beliefs per round: each active agent's stance towards the requirement's subject, as a round
observer (engine.sim.run.observers), and the split (for / neutral / against) that the report,
``/sim status`` and other features read.

After each completed round of a platform, every agent that took a step in it (``action`` or
``step_skipped`` lines of that round in ``<platform>/actions.jsonl``) gets a score in [-1, 1]:
- an agent that wrote, quoted, commented, liked, disliked or reposted something is classified by
  the LLM from those deeds, its persona's stance as the prior (``prompt``), ``batch``
  agents per structured call, with ``job=``/``scope=`` of the run so usage is counted and capped;
- an agent that acted without content (did nothing, only followed, its step skipped) keeps its
  last score on that platform, or its persona prior, marked carried (``sim_stances_carried``).

Rows go to ``sim_stances`` (1-based rounds; label 'for' above 0.2, 'against' below -0.2, else
'neutral'), a whole round in one transaction. A round already held is not classified again
(observers are called again for earlier rounds after a resume). A round whose classification
cannot be done (an LLM budget reached, an answer that stays unusable) is left without rows and
noted in ``sim_stance_skips`` with the reason; a later observation of it tries again.

This module owns those three tables (tests/test_sql_owners.py): the history (``stance.history``)
reads them through ``stances``, a fork copies its parent's past through ``copy_stances``.
"""
from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.db import Database
from engine.i18n import N_, _
from engine.jobs import JobError
from engine.llm.errors import BudgetExceeded, LLMError
from engine.offload import run_cpu
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.run.observers import RoundDone, RoundObserver
from engine.sim.run.output import ACTION, PLATFORMS, STEP_SKIPPED, actions_log, connect, log_rows, platform_db
from engine.sim.stance import prompt as stance_prompt

log = logging.getLogger(__name__)

THRESHOLD = 0.2
LABELS = ("for", "neutral", "against")
# How each stance reads in a chat, a report or a chart (translated where shown: ``stance_name``);
# the stored labels stay these English words.
LABEL_NAMES = {"for": N_("for"), "neutral": N_("neutral"), "against": N_("against")}


def label_of(score: float) -> str:
    return "for" if score > THRESHOLD else "against" if score < -THRESHOLD else "neutral"


def stance_name(label: str) -> str:
    """A stored stance label in the current language ("for" -> "a favor")."""
    return _(LABEL_NAMES[label]) if label in LABEL_NAMES else label


@dataclass(frozen=True)
class RoundSplit:
    platform: str
    round: int          # 1-based
    for_: int
    neutral: int
    against: int
    mean: float

    @property
    def total(self) -> int:
        return self.for_ + self.neutral + self.against

    def describe(self) -> str:
        """The split in the current language: "5 for · 2 neutral · 1 against"."""
        return _("{for_} for · {neutral} neutral · {against} against", for_=self.for_, neutral=self.neutral,
                 against=self.against)


# -- what agents did in a round (blocking; called through run_cpu) ----------------------------

def _post_text(conn: sqlite3.Connection | None, post_id) -> str:
    if conn is None or not isinstance(post_id, int):
        return ""
    row = conn.execute("SELECT coalesce(quote_content, content) FROM post WHERE post_id = ?", (post_id,)).fetchone()
    if row is not None and not row[0]:  # a plain repost: the original's words
        row = conn.execute("SELECT o.content FROM post p JOIN post o ON o.post_id = p.original_post_id"
                           " WHERE p.post_id = ?", (post_id,)).fetchone()
    return row[0] or "" if row else ""


def _comment_text(conn: sqlite3.Connection | None, comment_id) -> str:
    if conn is None or not isinstance(comment_id, int):
        return ""
    row = conn.execute("SELECT content FROM comment WHERE comment_id = ?", (comment_id,)).fetchone()
    return row[0] or "" if row else ""


def _commented_post(conn: sqlite3.Connection | None, comment_id) -> str:
    """The post a comment answers (oasis logs a comment with its own id only)."""
    if conn is None or not isinstance(comment_id, int):
        return ""
    row = conn.execute("SELECT post_id FROM comment WHERE comment_id = ?", (comment_id,)).fetchone()
    return _post_text(conn, row[0]) if row else ""


def _deed(action: str, info: dict, conn: sqlite3.Connection | None) -> str:
    """One action as the prompt shows it, or '' when it says nothing about a stance."""
    clip = stance_prompt.clip
    own = info.get("content") or info.get("quote_content")
    if action == "create_post" and own:
        return f'posted: "{clip(own)}"'
    if action == "quote_post":
        return f'quoted "{clip(_post_text(conn, info.get("post_id")))}" adding: "{clip(own or "")}"'
    if action == "create_comment" and own:
        on = _post_text(conn, info.get("post_id")) or _commented_post(conn, info.get("comment_id"))
        return f'commented on "{clip(on)}": "{clip(own)}"' if on else f'commented: "{clip(own)}"'
    verb = {"like_post": "liked", "dislike_post": "disliked", "repost": "reposted"}.get(action)
    if verb and (text := _post_text(conn, info.get("post_id"))):
        return f'{verb}: "{clip(text)}"'
    verb = {"like_comment": "liked the comment", "dislike_comment": "disliked the comment"}.get(action)
    if verb and (text := _comment_text(conn, info.get("comment_id"))):
        return f'{verb}: "{clip(text)}"'
    return ""


def round_deeds(folder: Path, platform: str, round_no: int) -> dict[int, list[str]]:
    """Agents that took a step in 1-based round ``round_no`` on ``platform`` -> what they did that
    says something about their stance (empty: they acted without content)."""
    path = actions_log(folder, platform)
    if not path.exists():
        return {}
    lines = [row for row in log_rows(path)
             if row.get("round") == round_no - 1 and row.get("type") in (ACTION, STEP_SKIPPED)
             and isinstance(row.get("agent_id"), int)]
    db_path = platform_db(folder, platform)
    conn = connect(db_path) if db_path.exists() else None
    try:
        deeds: dict[int, list[str]] = {}
        for row in lines:
            done = deeds.setdefault(row["agent_id"], [])
            info = row["info"] if isinstance(row.get("info"), dict) else {}
            if row["type"] == ACTION and (text := _deed(str(row.get("action", "")).lower(), info, conn)):
                done.append(text)
        return deeds
    finally:
        if conn is not None:
            conn.close()


def _load_config(folder: Path) -> SimulationConfig:
    return SimulationConfig.model_validate_json((Path(folder) / CONFIG_FILE).read_text(encoding="utf-8"))


# -- classification ---------------------------------------------------------------------------

async def _held(db: Database, sim_id: str, platform: str, round_no: int) -> bool:
    return await db.fetchval("SELECT 1 FROM sim_stances WHERE sim_id=? AND platform=? AND round=? LIMIT 1",
                             (sim_id, platform, round_no)) is not None


async def _previous(db: Database, sim_id: str, platform: str, round_no: int) -> dict[int, float]:
    """Each agent's latest score on the platform before ``round_no``."""
    rows = await db.fetchall(
        "SELECT agent_id, score FROM sim_stances s WHERE sim_id=? AND platform=? AND round = (SELECT max(round)"
        " FROM sim_stances t WHERE t.sim_id=s.sim_id AND t.platform=s.platform AND t.agent_id=s.agent_id"
        " AND t.round < ?)", (sim_id, platform, round_no))
    return {r["agent_id"]: r["score"] for r in rows}


async def _classify(llm, requirement: str, platform: str, round_no: int, agents: list[stance_prompt.AgentRound],
                    job: str | None, scope: str | None) -> dict[int, float]:
    answer = await llm.structured(stance_prompt.StanceBatch,
                                  stance_prompt.messages(requirement, platform, round_no, agents),
                                  job=job, scope=scope, checks=stance_prompt.CHECKS)
    asked = {a.agent_id for a in agents}
    scores = {s.agent_id: max(-1.0, min(1.0, s.score)) for s in answer.stances
              if s.agent_id in asked and math.isfinite(s.score)}
    if missing := asked - set(scores):
        log.info("stance of %s round %d: no score for agents %s", platform, round_no, sorted(missing))
    return scores


async def classify_round(db: Database, llm, done: RoundDone, batch: int = 20) -> str:
    """Classify one completed round of one platform (see the module docstring). Returns what it
    did, in words ('held already', '5 agents classified, 2 carried', 'skipped: ...')."""
    if await _held(db, done.sim_id, done.platform, done.round):
        return "held already"
    cfg = await run_cpu(_load_config, done.folder)
    deeds = await run_cpu(round_deeds, done.folder, done.platform, done.round)
    if not deeds:
        return "no agent acted"
    personas = {a.agent_id: a for a in cfg.agents}
    previous = await _previous(db, done.sim_id, done.platform, done.round)

    def prior(agent_id: int) -> float:
        persona = personas.get(agent_id)
        return previous.get(agent_id, stance_prompt.PRIOR.get(persona.stance, 0.0) if persona else 0.0)

    speaking = [stance_prompt.AgentRound(a, personas[a].username if a in personas else f"agent{a}",
                                         personas[a].stance if a in personas else "neutral", previous.get(a), d)
                for a, d in sorted(deeds.items()) if d]
    batches = [speaking[i:i + batch] for i in range(0, len(speaking), batch)]
    found = await asyncio.gather(*(_classify(llm, cfg.requirement, done.platform, done.round, b, done.job_id,
                                             done.scope) for b in batches), return_exceptions=True)
    failed = [f for f in found if isinstance(f, BaseException)]
    parts = [f for f in found if not isinstance(f, BaseException)]
    if budget := next((f for f in failed if isinstance(f, BudgetExceeded)), None):
        return await _skip(db, done, f"LLM budget reached: {budget}")
    if failed and isinstance(failed[0], (JobError, LLMError)):  # InvalidAnswer, an unreachable endpoint
        return await _skip(db, done, str(failed[0]))
    if failed:
        raise failed[0]
    scores = {k: v for part in parts for k, v in part.items()}
    carried = [a for a, d in deeds.items() if not d]
    scores.update({a: prior(a) for a in carried})
    key = (done.sim_id, done.platform, done.round)
    async with db.transaction() as conn:
        await conn.executemany("INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label)"
                               " VALUES (?,?,?,?,?,?) ON CONFLICT(sim_id, platform, round, agent_id)"
                               " DO UPDATE SET score=excluded.score, label=excluded.label",
                               [(*key, a, s, label_of(s)) for a, s in scores.items()])
        await conn.executemany("INSERT INTO sim_stances_carried(sim_id, platform, round, agent_id)"
                               " VALUES (?,?,?,?) ON CONFLICT DO NOTHING", [(*key, a) for a in carried])
        await conn.execute("DELETE FROM sim_stance_skips WHERE sim_id=? AND platform=? AND round=?",
                           (done.sim_id, done.platform, done.round))
    return f"{len(scores) - len(carried)} agents classified, {len(carried)} carried"


async def _skip(db: Database, done: RoundDone, reason: str) -> str:
    log.warning("stances of %s %s round %d not classified: %s", done.sim_id, done.platform, done.round, reason)
    await db.execute("INSERT INTO sim_stance_skips(sim_id, platform, round, reason) VALUES (?,?,?,?)"
                     " ON CONFLICT(sim_id, platform, round) DO UPDATE SET reason=excluded.reason",
                     (done.sim_id, done.platform, done.round, reason))
    return f"skipped: {reason}"


def observer(db: Database, llm, batch: int = 20) -> RoundObserver:
    """The round observer that tracks beliefs (``[simulation] track_stances``, ``stance_batch``)."""
    async def track_stances(done: RoundDone) -> None:
        outcome = await classify_round(db, llm, done, batch)
        log.info("stances of %s %s round %d: %s", done.sim_id, done.platform, done.round, outcome)
    return track_stances


# -- reading ----------------------------------------------------------------------------------

async def copy_stances(conn: Any, parent_id: str, sim_id: str, up_to_round: int) -> None:
    """Within a transaction (``conn``): ``sim_id`` holds ``parent_id``'s stances of rounds up to
    ``up_to_round`` (a fork shares its parent's past, engine.sim.fork)."""
    await conn.execute(
        "INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label)"
        " SELECT ?, platform, round, agent_id, score, label FROM sim_stances WHERE sim_id=? AND round<=?",
        (sim_id, parent_id, up_to_round))


async def stances(db: Database, sim_id: str) -> list[tuple[str, int, int, float, str]]:
    """(platform, round, agent id, score, label) of every stance recorded for ``sim_id``."""
    rows = await db.fetchall("SELECT platform, round, agent_id, score, label FROM sim_stances"
                             " WHERE sim_id = ?", (sim_id,))
    return [(str(r["platform"]), int(r["round"]), int(r["agent_id"]), float(r["score"]), str(r["label"]))
            for r in rows]


async def split_by_round(db: Database, sim_id: str) -> list[RoundSplit]:
    """The split per platform and 1-based round, in platform then round order."""
    rows = await db.fetchall(
        "SELECT platform, round, sum(CASE WHEN label='for' THEN 1 ELSE 0 END) AS f,"
        " sum(CASE WHEN label='neutral' THEN 1 ELSE 0 END) AS n, sum(CASE WHEN label='against' THEN 1 ELSE 0 END) AS a,"
        " avg(score) AS mean FROM sim_stances WHERE sim_id=? GROUP BY platform, round ORDER BY platform, round",
        (sim_id,))
    return [RoundSplit(r["platform"], r["round"], r["f"], r["n"], r["a"], r["mean"]) for r in rows]


async def agent_scores(db: Database, sim_id: str) -> list[tuple[str, int, int, float]]:
    """Every (platform, round, agent_id, score) held for the simulation."""
    rows = await db.fetchall("SELECT platform, round, agent_id, score FROM sim_stances WHERE sim_id=?"
                             " ORDER BY platform, round, agent_id", (sim_id,))
    return [(r["platform"], r["round"], r["agent_id"], r["score"]) for r in rows]


async def skipped_rounds(db: Database, sim_id: str) -> list[tuple[str, int, str]]:
    rows = await db.fetchall("SELECT platform, round, reason FROM sim_stance_skips WHERE sim_id=?"
                             " ORDER BY platform, round", (sim_id,))
    return [(r["platform"], r["round"], r["reason"]) for r in rows]


def _platform_rank(platform: str) -> int:
    return PLATFORMS.index(platform) if platform in PLATFORMS else len(PLATFORMS)


async def beliefs_line(db: Database, sim_id: str) -> str | None:
    """The latest split per platform for /sim status ('beliefs after round 4: twitter 5 for ·
    2 neutral · 1 against; reddit ...'), with any rounds left unclassified; None when none."""
    latest: dict[str, RoundSplit] = {}
    for split in sorted(await split_by_round(db, sim_id), key=lambda s: (_platform_rank(s.platform), s.round)):
        latest[split.platform] = split
    skipped = await skipped_rounds(db, sim_id)
    if not latest and not skipped:
        return None
    text = ""
    if latest:
        rounds = {s.round for s in latest.values()}
        if len(rounds) == 1:
            text = _("beliefs after round {round}: {splits}", round=rounds.pop(), splits="; ".join(
                f"{p} {s.describe()}" for p, s in latest.items()))
        else:
            text = _("beliefs: {splits}", splits="; ".join(
                _("{platform} after round {round} {split}", platform=p, round=s.round, split=s.describe())
                for p, s in latest.items()))
    if skipped:
        where = ", ".join(rounds_named(skipped[:6])) + (" …" if len(skipped) > 6 else "")
        note = _("stances not classified for {where} ({reason})", where=where, reason=skipped[-1][2])
        text = f"{text} · {note}" if text else note
    return text


def rounds_named(skipped: list[tuple[str, int, str]]) -> list[str]:
    """The rounds of ``skipped_rounds`` as the current language names them ("twitter round 3")."""
    return [_("{platform} round {round}", platform=p, round=r) for p, r, _reason in skipped]
