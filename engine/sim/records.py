"""The simulation tables: ``simulations`` (one row per simulation), ``sim_steps`` (completed
pipeline steps, the checkpoints a resumed simulation skips) and ``sim_reports`` (the written
report). The runs of an ensemble are simulations too (``ensemble_of``, ``run_no``;
engine.sim.ensemble): a chat names one by its id (``<head>-r2``), but lists show the head only.
Every SQL statement on them lives here, as free functions that take the Database; the ``Simulations``
service (engine.sim.simulations) is their facade for the bot.

A simulation belongs to a scope and to the *audience* of the channel it started in
(engine.memory.audience: '' every member of the scope, else a restricted audience). Wherever a
chat names or lists simulations it does so as a ``Viewer`` (the scope and the audience of the
channel asking) and sees only those that viewer may read, by memory's own rule
(``Viewer.where`` in SQL, ``Viewer.sees`` in Python): one of another server or chat, or of an
audience the asking channel's does not read, is as unknown as one that does not exist, and is
refused with the same words (``not_here``), so its existence does not leak. No viewer (None) is
the operator at the command line, who sees every simulation.
"""
from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from engine.config import Config
from engine.db import Database
from engine.i18n import _
from engine.jobs import JobError, active_of_kind, utcnow
from engine.memory.audience import PUBLIC, Viewer
from engine.sim.context import SimSpec
from engine.sim.environment import sizing


@dataclass
class SimRecord:
    """One row of ``simulations``."""
    id: str
    scope: str
    channel: str | None
    job_id: str | None
    requirement: str
    spec: SimSpec
    folder: Path
    created_at: str
    parent_id: str | None = None     # a fork's lineage (engine.sim.fork)
    fork_round: int | None = None
    fork_event: str | None = None
    audience: str = PUBLIC           # who may see it (module docstring)
    ensemble_of: str | None = None   # one run of an ensemble: its head (engine.sim.ensemble)
    run_no: int | None = None        # and which run, from 1

    @classmethod
    def from_row(cls, row) -> "SimRecord":
        spec = {"documents": [], "requirement": row["requirement"], **json.loads(row["spec"] or "{}")}
        return cls(row["id"], row["scope"], row["channel"], row["job_id"], row["requirement"],
                   SimSpec(**spec), Path(row["folder"]), row["created_at"], row["parent_id"], row["fork_round"],
                   row["fork_event"], row["audience"], row["ensemble_of"], row["run_no"])

    @property
    def run(self) -> int:
        """Its run number: ``run_no`` for a run of an ensemble, 1 for a simulation of one run."""
        return self.run_no or 1

    @property
    def runs(self) -> int:
        """How many runs its step 4 is (1 for a single run and for one run of an ensemble)."""
        return max(1, self.spec.runs or 1)


@dataclass
class SimListing:
    """A line of /sims: a simulation with its job's state, how many steps it completed, how many
    runs it has and the score of its forecast once an outcome was recorded (engine.sim.outcome)."""
    id: str
    requirement: str
    created_at: str
    state: str | None
    progress: float | None
    steps: int
    parent_id: str | None = None
    fork_round: int | None = None
    fork_event: str | None = None
    runs: int = 1
    score: float | None = None
    outcome: bool = False          # an outcome is recorded (scored or not yet)


def sims_dir(config: Config) -> Path:
    return config.data_dir / "sims"


def not_here(sim_id: str) -> str:
    """The one answer to a simulation id the asker may not see, whether or not it exists."""
    return _("no simulation {sim} here. /sims lists them.", sim=sim_id)


def visible(viewer: Viewer | None, scope: str, audience: str) -> bool:
    """Whether ``viewer`` may see a simulation of ``scope`` and ``audience`` (None: the operator)."""
    return viewer is None or (viewer.scope == scope and viewer.sees(audience))


def seen_by(viewer: Viewer | None, alias: str = "") -> tuple[str, list[str]]:
    """``visible`` as an SQL condition on the simulations table (``alias``: its name in the query)."""
    if viewer is None:
        return "1=1", []
    audience, params = viewer.where(f"{alias}audience")
    return f"{alias}scope=? AND {audience}", [viewer.scope, *params]


def fork_audience(parent_audience: str, asker: Viewer | None) -> str:
    """The audience of a fork: its parent's, unless the parent is public and the fork is asked for
    in a restricted channel; then that channel's, as for any simulation started there (the fork's
    event was typed there, and the asker, who sees the parent, reads no wider than it)."""
    if parent_audience != PUBLIC or asker is None or asker.audience is None:
        return parent_audience
    return asker.audience


async def create(db: Database, config: Config, files: list[Path], requirement: str, scope: str,
                 channel: str | None = None, agents: int | None = None, rounds: int | None = None,
                 folder: Path | None = None, audience: str = PUBLIC, runs: int | None = None,
                 files_written: Sequence[tuple[str, str]] = (),
                 language: str = SimSpec.language) -> tuple[str, SimSpec]:
    """Register a simulation and copy its documents into its folder (``files_written``: documents
    given as (file name, text), a seed brief); it belongs to ``audience``, the audience of
    ``channel``; its step 4 is ``runs`` runs (None: one; capped at ``max_runs``); it writes in
    ``language`` (engine.sim.context.spec_language)."""
    requirement = requirement.strip()
    if not requirement:
        raise JobError(_("say what the simulation should predict (the requirement is empty)"))
    sizing.check(agents, rounds, runs)
    runs = sizing.resolve(config.simulation, agents, rounds, runs).runs if runs else None
    sim_id = secrets.token_hex(4)
    folder = (folder or sims_dir(config) / sim_id).resolve()
    if folder.exists() and any(folder.iterdir()):
        # its caches (extractions, personas) would be taken for this simulation's
        raise JobError(_("the folder {folder} is not empty; choose a new one", folder=folder))
    docs = folder / "documents"
    docs.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for f in files:
        name = f.name
        n = 2
        while name in names:  # two attachments with one name stay two documents
            name, n = f"{f.stem}_{n}{f.suffix}", n + 1
        shutil.copyfile(f, docs / name)
        names.append(name)
    for name, text in files_written:
        (docs / name).write_text(text, encoding="utf-8")
        names.append(name)
    spec = SimSpec(names, requirement, agents, rounds, runs if runs and runs > 1 else None, language)
    await db.execute(
        "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at, audience)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (sim_id, scope, channel, requirement, json.dumps(asdict(spec)), str(folder), utcnow(), audience))
    return sim_id, spec


async def get(db: Database, sim_id: str, viewer: Viewer | None = None) -> SimRecord | None:
    """The simulation ``sim_id``, if ``viewer`` may see it (None: the operator sees any)."""
    seen, params = seen_by(viewer)
    row = await db.fetchone(f"SELECT * FROM simulations WHERE id=? AND {seen}", (sim_id, *params))
    return None if row is None else SimRecord.from_row(row)


async def row(db: Database, sim_id: str) -> Any:
    """The stored row of simulation ``sim_id`` as it is (None when there is none); the caller checks
    who may see it."""
    return await db.fetchone("SELECT * FROM simulations WHERE id=?", (sim_id,))


async def add_fork(conn: Any, parent: Any, sim_id: str, folder: Path, spec: SimSpec, fork_round: int,
                   event: str | None, channel: str | None, audience: str, now: str) -> None:
    """Within a transaction (``conn``): register ``sim_id``, the fork of the ``parent`` row at round
    ``fork_round`` (engine.sim.fork)."""
    await conn.execute(
        "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at, parent_id, fork_round,"
        " fork_event, audience) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (sim_id, parent["scope"], channel, parent["requirement"], json.dumps(asdict(spec)), str(folder),
         now, parent["id"], fork_round, event, audience))


async def add_member(conn: Any, head: SimRecord, sim_id: str, run_no: int, spec: SimSpec, folder: Path,
                     now: str) -> None:
    """Within a transaction (``conn``): register ``sim_id``, run ``run_no`` of the ensemble ``head``
    (engine.sim.ensemble)."""
    await conn.execute(
        "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at, audience,"
        " ensemble_of, run_no) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (sim_id, head.scope, head.channel, head.requirement, json.dumps(asdict(spec)), str(folder), now,
         head.audience, head.id, run_no))


async def members(db: Database, head_id: str) -> list[SimRecord]:
    """The registered runs of ``head_id``, in run order (none for a simulation of one run)."""
    rows = await db.fetchall("SELECT * FROM simulations WHERE ensemble_of=? ORDER BY run_no", (head_id,))
    return [SimRecord.from_row(r) for r in rows]


async def copy_steps(conn: Any, parent_id: str, sim_id: str, steps: Sequence[str], now: str) -> None:
    """Within a transaction (``conn``): ``sim_id`` has ``parent_id``'s completed ``steps``, with 0
    LLM calls (``sim_id`` spent none)."""
    await conn.execute(
        "INSERT INTO sim_steps(sim_id, step, summary, llm_calls, tokens, finished_at)"
        " SELECT ?, step, summary, 0, 0, ? FROM sim_steps"
        f" WHERE sim_id=? AND step IN ({','.join('?' * len(steps))}) ORDER BY rowid",
        (sim_id, now, parent_id, *steps))


async def listing(db: Database, viewer: Viewer, limit: int = 15) -> list[SimListing]:
    """The latest simulations ``viewer`` may see in its scope, newest first (an ensemble's runs
    under their head only)."""
    seen, params = seen_by(viewer, "s.")
    rows = await db.fetchall(
        "SELECT s.id, s.requirement, s.created_at, j.state, j.progress,"
        " (SELECT count(*) FROM sim_steps t WHERE t.sim_id = s.id) AS steps, s.parent_id, s.fork_round, s.fork_event,"
        " s.spec, o.score, o.sim_id AS outcome"
        " FROM simulations s LEFT JOIN jobs j ON j.id = s.job_id LEFT JOIN sim_outcomes o ON o.sim_id = s.id"
        f" WHERE {seen} AND s.ensemble_of IS NULL ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?", (*params, limit))
    return [SimListing(r["id"], r["requirement"], r["created_at"], r["state"], r["progress"], r["steps"],
                       r["parent_id"], r["fork_round"], r["fork_event"],
                       max(1, json.loads(r["spec"] or "{}").get("runs") or 1), r["score"], r["outcome"] is not None)
            for r in rows]


async def set_job(db: Database, sim_id: str, job_id: str) -> None:
    await db.execute("UPDATE simulations SET job_id=? WHERE id=?", (job_id, sim_id))


async def starter(db: Database, sim_id: str, viewer: Viewer) -> str | None:
    """Who started the job of simulation ``sim_id`` (one run of an ensemble: its head's; '' when
    nobody is recorded); None when ``viewer`` sees no such simulation."""
    seen, params = seen_by(viewer, "s.")
    return await db.fetchval(
        "SELECT coalesce(j.started_by, '') FROM simulations s LEFT JOIN simulations h ON h.id = s.ensemble_of"
        f" LEFT JOIN jobs j ON j.id = coalesce(s.job_id, h.job_id) WHERE s.id=? AND {seen}", (sim_id, *params))


async def active_job(db: Database, sim_id: str) -> str | None:
    """The id of the simulation's own job while it is queued or running."""
    return await db.fetchval(
        "SELECT j.id FROM simulations s JOIN jobs j ON j.id = s.job_id"
        " WHERE s.id = ? AND j.state IN ('queued','running')", (sim_id,))


async def completed_steps(db: Database, sim_id: str) -> dict[str, dict]:
    rows = await db.fetchall("SELECT * FROM sim_steps WHERE sim_id=? ORDER BY finished_at, rowid", (sim_id,))
    return {r["step"]: {"summary": json.loads(r["summary"]), "llm_calls": r["llm_calls"], "tokens": r["tokens"],
                        "finished_at": r["finished_at"]} for r in rows}


async def record_step(db: Database, sim_id: str, step: str, summary: dict[str, Any], llm_calls: int,
                      tokens: int) -> None:
    await db.execute(
        "INSERT INTO sim_steps(sim_id, step, summary, llm_calls, tokens, finished_at) VALUES (?,?,?,?,?,?)"
        " ON CONFLICT(sim_id, step) DO UPDATE SET summary=excluded.summary, llm_calls=excluded.llm_calls,"
        " tokens=excluded.tokens, finished_at=excluded.finished_at",
        (sim_id, step, json.dumps(summary), llm_calls, tokens, utcnow()))


async def record_report(db: Database, sim_id: str, path: Path, title: str, summary: str, sections: int,
                        tool_calls: int, citations: int, unverified: int) -> None:
    await db.execute(
        "INSERT INTO sim_reports(sim_id, path, title, summary, sections, tool_calls, citations,"
        " unverified, created_at) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(sim_id) DO UPDATE SET"
        " path=excluded.path, title=excluded.title, summary=excluded.summary, sections=excluded.sections,"
        " tool_calls=excluded.tool_calls, citations=excluded.citations, unverified=excluded.unverified,"
        " created_at=excluded.created_at",
        (sim_id, str(path), title, summary, sections, tool_calls, citations, unverified, utcnow()))


async def report_job(db: Database, sim_id: str) -> str | None:
    """The id of a queued or running report job of ``sim_id``."""
    return next((job_id for job_id, params in await active_of_kind(db, "report")
                 if json.loads(params).get("sim_id") == sim_id), None)
