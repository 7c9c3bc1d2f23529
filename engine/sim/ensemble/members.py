"""The runs of an ensemble as simulations: their ids, seeds, folders and rows.

A run is registered when the head's step 4 starts (``prepare``; steps 1-3 are done by then):

- a ``simulations`` row (engine.sim.records ``add_member``, ``members`` lists them): id
  ``<head>-r<K>``, the head's scope, channel, requirement, audience and spec (one run),
  ``ensemble_of`` the head and ``run_no`` K;
- its folder ``<head folder>/runs/<K>/`` with the head's steps 1-3 outputs linked in
  (``engine.sim.fork.share_files``), its own ``simulation_config.json`` (its id, its seed) and the
  events injected into the head before the run (``injections.json``);
- the head's ``sim_steps`` rows of steps 1-3 and its knowledge graph (``engine.sim.fork.share_steps``).

``prepare`` is idempotent: a resumed step 4 finds the runs it registered and registers only the
missing ones (a folder left by a crash before its row was written is made again).
"""
from __future__ import annotations

import asyncio
import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

from engine.config import Config
from engine.db import Database
from engine.jobs import utcnow
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.fork import share_files, share_steps
from engine.sim.records import SimRecord, add_member, members
from engine.sim.run.injections import INJECTIONS_FILE
from engine.sim.run.output import platforms_of

RUNS_DIR = "runs"


def member_id(head_id: str, k: int) -> str:
    """The id of run ``k`` (from 1) of ensemble ``head_id``."""
    return f"{head_id}-r{k}"


def run_seed(seed: int, k: int) -> int:
    """The seed of run ``k``: run 1 draws from the simulation's own seed (a one-run simulation
    and run 1 of an ensemble draw alike), run K from one derived from it."""
    if k == 1:
        return seed
    return int(hashlib.sha256(f"{seed}:run {k}".encode()).hexdigest()[:8], 16)


def _prepare_folder(head: Path, folder: Path, sim_id: str, seed: int) -> None:
    """The run's folder (blocking); a half-made one from an earlier attempt is made again."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    share_files(head, folder)
    cfg = SimulationConfig.model_validate_json((head / CONFIG_FILE).read_text(encoding="utf-8"))
    cfg.sim_id, cfg.seed = sim_id, seed
    (folder / CONFIG_FILE).write_text(cfg.model_dump_json(indent=1), encoding="utf-8")
    if (head / INJECTIONS_FILE).exists():   # events injected before the run go out in every run
        shutil.copyfile(head / INJECTIONS_FILE, folder / INJECTIONS_FILE)


async def prepare(db: Database, config: Config, head: SimRecord, runs: int) -> list[SimRecord]:
    """Register runs 1..``runs`` of ``head`` that are not registered yet; all of them, in order."""
    have = {m.run for m in await members(db, head.id)}
    cfg = SimulationConfig.model_validate_json((head.folder / CONFIG_FILE).read_text(encoding="utf-8"))
    spec = replace(head.spec, runs=None)
    for k in range(1, runs + 1):
        if k in have:
            continue
        sim_id = member_id(head.id, k)
        folder = head.folder / RUNS_DIR / str(k)
        await asyncio.to_thread(_prepare_folder, head.folder, folder, sim_id, run_seed(cfg.seed, k))
        now = utcnow()
        async with db.transaction() as conn:
            await add_member(conn, head, sim_id, k, spec, folder, now)
            await share_steps(conn, db.dialect, head.id, sim_id, now)
    return await members(db, head.id)


async def ran(db: Database, sim: SimRecord) -> list[tuple[int, str, Path]]:
    """(run number, id, folder) of each run of ``sim`` that has run (an ensemble's runs that
    have; a simulation of one run, itself when it has)."""
    runs = ([(m.run, m.id, m.folder) for m in await members(db, sim.id)] if sim.runs > 1
            else [(1, sim.id, sim.folder)])
    found = await asyncio.gather(*(asyncio.to_thread(platforms_of, folder) for _, _, folder in runs))
    return [run for run, platforms in zip(runs, found) if platforms]
