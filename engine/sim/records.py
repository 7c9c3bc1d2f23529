"""The simulation tables: ``simulations`` (one row per simulation), ``sim_steps`` (completed
pipeline steps, the checkpoints a resumed simulation skips) and ``sim_reports`` (the written
report). Every SQL statement on them lives here, as free functions that take the Database;
the ``Simulations`` service (engine.sim.simulations) is their facade for the bot.

A simulation is looked up "within a scope" wherever a chat names it: an id from another
server or chat is as unknown as one that does not exist.
"""
from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.config import Config
from engine.db import Database
from engine.jobs import JobError, utcnow
from engine.sim import sizing
from engine.sim.context import SimSpec


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

    @classmethod
    def from_row(cls, row) -> "SimRecord":
        spec = {"documents": [], "requirement": row["requirement"], **json.loads(row["spec"] or "{}")}
        return cls(row["id"], row["scope"], row["channel"], row["job_id"], row["requirement"],
                   SimSpec(**spec), Path(row["folder"]), row["created_at"], row["parent_id"], row["fork_round"],
                   row["fork_event"])


@dataclass
class SimListing:
    """A line of /sims: a simulation with its job's state and how many steps it completed."""
    id: str
    requirement: str
    created_at: str
    state: str | None
    progress: float | None
    steps: int
    parent_id: str | None = None
    fork_round: int | None = None
    fork_event: str | None = None


def sims_dir(config: Config) -> Path:
    return config.data_dir / "sims"


async def create(db: Database, config: Config, files: list[Path], requirement: str, scope: str,
                 channel: str | None = None, agents: int | None = None, rounds: int | None = None,
                 folder: Path | None = None) -> tuple[str, SimSpec]:
    """Register a simulation and copy its documents into its folder."""
    requirement = requirement.strip()
    if not requirement:
        raise JobError("say what the simulation should predict (the requirement is empty)")
    sizing.check(agents, rounds)
    sim_id = secrets.token_hex(4)
    folder = (folder or sims_dir(config) / sim_id).resolve()
    if folder.exists() and any(folder.iterdir()):
        # its caches (extractions, personas) would be taken for this simulation's
        raise JobError(f"the folder {folder} is not empty; choose a new one")
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
    spec = SimSpec(names, requirement, agents, rounds)
    await db.execute(
        "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at) VALUES (?,?,?,?,?,?,?)",
        (sim_id, scope, channel, requirement, json.dumps(asdict(spec)), str(folder), utcnow()))
    return sim_id, spec


async def get(db: Database, sim_id: str, scope: str | None = None) -> SimRecord | None:
    """The simulation ``sim_id`` (within ``scope`` when given)."""
    if scope is None:
        row = await db.fetchone("SELECT * FROM simulations WHERE id=?", (sim_id,))
    else:
        row = await db.fetchone("SELECT * FROM simulations WHERE id=? AND scope=?", (sim_id, scope))
    return None if row is None else SimRecord.from_row(row)


async def listing(db: Database, scope: str, limit: int = 15) -> list[SimListing]:
    """The latest simulations of ``scope``, newest first."""
    rows = await db.fetchall(
        "SELECT s.id, s.requirement, s.created_at, j.state, j.progress,"
        " (SELECT count(*) FROM sim_steps t WHERE t.sim_id = s.id) AS steps, s.parent_id, s.fork_round, s.fork_event"
        " FROM simulations s LEFT JOIN jobs j ON j.id = s.job_id WHERE s.scope=?"
        " ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?", (scope, limit))
    return [SimListing(*row) for row in rows]


async def set_job(db: Database, sim_id: str, job_id: str) -> None:
    await db.execute("UPDATE simulations SET job_id=? WHERE id=?", (job_id, sim_id))


async def starter(db: Database, sim_id: str, scope: str) -> str | None:
    """Who started the job of simulation ``sim_id`` of ``scope`` ('' when nobody is recorded);
    None when there is no such simulation."""
    return await db.fetchval(
        "SELECT coalesce(j.started_by, '') FROM simulations s LEFT JOIN jobs j ON j.id = s.job_id"
        " WHERE s.id=? AND s.scope=?", (sim_id, scope))


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
        " tokens=excluded.tokens, finished_at=excluded.finished_at", (sim_id, step, json.dumps(summary), llm_calls, tokens, utcnow()))


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
    rows = await db.fetchall(
        "SELECT id, params FROM jobs WHERE kind='report' AND state IN ('queued','running')")
    return next((r["id"] for r in rows if json.loads(r["params"]).get("sim_id") == sim_id), None)
