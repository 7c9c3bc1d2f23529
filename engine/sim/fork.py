"""Fork a simulation at a completed round: a new simulation that shares its parent's steps 1-3
and starts from the exact state after round K (both platforms' databases, every agent's memory,
the actions logged so far), optionally with an event injected at round K+1.

``fork_simulation`` registers the fork and prepares its folder; it makes no LLM call. What it
writes makes the pipeline go straight to the run, and the run resume from round K+1 exactly as
after a crash (``engine.sim.run.child.main`` ``_restore_files``, ``SimRuns.run``):

- a ``simulations`` row: new id, the parent's scope, channel and requirement, the spec with the
  fork's round count, lineage columns ``parent_id``, ``fork_round`` (K, 1-based), ``fork_event``,
  and the parent's audience (``records.fork_audience``: the asking channel's, when the parent is
  public and the fork is asked for in a restricted channel);
- the parent's steps 1-3 outputs (documents, ontology, graph summary, personas, profiles; hard
  links where possible) and ``simulation_config.json`` with the fork's id and round count;
- ``sim_steps`` rows for those steps (with 0 LLM calls: the fork spent none) and a copy of the
  parent's knowledge graph rows under the fork's id (``GraphStore`` keys rows by simulation);
- per platform: ``<platform>.db`` and ``checkpoint.db`` from round K's fork point
  (``engine.sim.run.fork_points``), ``memory.json``, ``checkpoint.json`` (rounds_done K),
  ``actions.jsonl`` cut at round K's length, and the parent's fork points up to K (linked, so a
  fork of the fork can start earlier);
- a ``sim_runs`` row (status ``stopped``, rounds done K, the actions count at K), so the run step
  resumes; stance rows of rounds <= K are copied when that table exists (observers keep them);
- ``injections.json``: the parent's injections of rounds <= K (the shared past) and ``inject``
  at round K+1.

A running parent can be forked: round K's fork point is final once written. Without a fork point
(thinned out, or a budget of 0), a parent whose run is not running forks at its last completed
round from its checkpoint. Refusals are ``ForkRefused``: one line that says what can be done.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from engine.config import Config
from engine.db import Database
from engine.i18n import _
from engine.jobs import JobError
from engine.memory.audience import Viewer
from engine.sim import records
from engine.sim.context import SimSpec
from engine.sim.environment.models import CONFIG_FILE, REDDIT_PROFILES, TWITTER_PROFILES, SimulationConfig
from engine.sim.graph.store import copy_graph
from engine.sim.records import fork_audience, not_here, sims_dir, visible
from engine.sim.run import fork_points
from engine.sim.run.injections import DEFAULT_SOURCE, Injection, append_injection, read_injections
from engine.sim.run.output import (
    ACTIONS_LOG,
    CHECKPOINT,
    CHECKPOINT_DB,
    MEMORY_FILE,
    PLATFORMS,
    platform_db,
    platform_dir,
)
from engine.sim.run.service import add_stopped_run, stored_run
from engine.sim.stance.tracking import copy_stances

SHARED_STEPS = ("ontology", "graph", "environment")
SHARED_FILES = ("documents.json", "ontology.json", "graph_summary.json", "personas.json", TWITTER_PROFILES,
                REDDIT_PROFILES)
SHARED_DIRS = ("documents", "personas")


class ForkRefused(JobError):
    """The fork cannot be made; the message says why and what can be done, in one line."""


@dataclass(frozen=True)
class Fork:
    sim_id: str
    parent_id: str
    folder: Path
    from_round: int          # 1-based: the fork starts from the state after this round
    rounds: int              # the fork's total round count
    event: str | None
    scope: str
    channel: str | None


@dataclass(frozen=True)
class _Source:
    """Where one platform's state after round K comes from."""
    platform: str
    db: Path
    memory: Path
    log_bytes: int
    actions: int
    trace_rowid: int


def _utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def forkable_rounds(folder: Path, platforms: list[str], last_checkpoint: int | None) -> list[int]:
    """Rounds every platform can be forked at: their kept fork points, and ``last_checkpoint``
    (the last completed round of a run that is not running) when given."""
    common = set.intersection(*(set(fork_points.available(folder, p)) for p in platforms)) if platforms else set()
    if last_checkpoint:
        common.add(last_checkpoint)
    return sorted(common)


async def fork_rounds(db: Database, sim_id: str) -> list[int] | None:
    """The rounds a fork of ``sim_id`` may start from now; None when it has no run."""
    run = await stored_run(db, sim_id)
    if run is None:
        return None
    done = json.loads(run["rounds_done"])
    platforms = [p for p in PLATFORMS if p in done]
    completed = min((done[p] for p in platforms), default=0)
    settled = run["status"] != "running"
    return await asyncio.to_thread(forkable_rounds, Path(run["folder"]), platforms, completed if settled else None)


def _sources(folder: Path, platforms: list[str], k: int, run_row, settled: bool) -> list[_Source] | None:
    """Each platform's state after round ``k``, or None when some platform does not keep it."""
    found = []
    for p in platforms:
        point = fork_points.read_point(folder, p, k)
        pdir = fork_points.point_dir(folder, p, k)
        if point is not None:
            found.append(_Source(p, pdir / f"{p}.db", pdir / MEMORY_FILE, point["bytes"], point["actions"],
                                 point.get("trace_rowid", 0)))
            continue
        if not settled:
            return None
        try:
            checkpoint = json.loads((platform_dir(folder, p) / CHECKPOINT).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if checkpoint.get("rounds_done") != k:
            return None
        log = platform_dir(folder, p) / ACTIONS_LOG
        found.append(_Source(p, platform_dir(folder, p) / CHECKPOINT_DB, platform_dir(folder, p) / MEMORY_FILE,
                             log.stat().st_size if log.exists() else 0,
                             json.loads(run_row["actions"]).get(p, 0), checkpoint.get("trace_rowid", 0)))
    return found


def share_files(parent: Path, child: Path) -> None:
    """The outputs of steps 1-3 in ``parent``'s folder, linked (or copied) into ``child``'s (blocking);
    ``simulation_config.json`` is the caller's to write."""
    for name in SHARED_FILES:
        if (parent / name).exists():
            fork_points.link_or_copy(parent / name, child / name)
    for name in SHARED_DIRS:
        if (parent / name).is_dir():
            shutil.copytree(parent / name, child / name, copy_function=fork_points.link_or_copy)


async def share_steps(conn, dialect: str, parent_id: str, sim_id: str, now: str) -> None:
    """Within a transaction (``conn``): ``sim_id`` shares ``parent_id``'s steps 1-3, their
    ``sim_steps`` rows (with 0 LLM calls: ``sim_id`` spent none) and a copy of its knowledge graph
    rows under ``sim_id`` (``GraphStore`` keys rows by simulation; the copies get new ids)."""
    await records.copy_steps(conn, parent_id, sim_id, SHARED_STEPS, now)
    await copy_graph(conn, dialect, parent_id, sim_id)


def _copy_prefix(src: Path, dst: Path, length: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        remaining = length
        while remaining > 0 and (chunk := fin.read(min(remaining, 1 << 20))):
            fout.write(chunk)
            remaining -= len(chunk)


def _write_json_atomic(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _prepare_folder(parent: Path, child: Path, sim_id: str, k: int, rounds: int, sources: list[_Source],
                    injections: list[Injection]) -> None:
    """Everything on disk (run off the event loop); FileNotFoundError when a fork point vanished."""
    child.mkdir(parents=True)
    share_files(parent, child)
    cfg = SimulationConfig.model_validate_json((parent / CONFIG_FILE).read_text(encoding="utf-8"))
    cfg.sim_id = sim_id
    cfg.time.rounds = rounds
    cfg.time.total_hours = max(1, -(-rounds * cfg.time.minutes_per_round // 60))
    (child / CONFIG_FILE).write_text(cfg.model_dump_json(indent=1), encoding="utf-8")
    for s in sources:
        pdir = platform_dir(child, s.platform)
        pdir.mkdir()
        fork_points.link_or_copy(s.db, pdir / CHECKPOINT_DB)  # replaced, never written in place
        shutil.copyfile(s.db, platform_db(child, s.platform))  # written in place by oasis
        fork_points.link_or_copy(s.memory, pdir / MEMORY_FILE)
        _copy_prefix(platform_dir(parent, s.platform) / ACTIONS_LOG, pdir / ACTIONS_LOG, s.log_bytes)
        _write_json_atomic(pdir / CHECKPOINT, {"rounds_done": k, "trace_rowid": s.trace_rowid})
        for r in fork_points.available(parent, s.platform):
            if r <= k:
                shutil.copytree(fork_points.point_dir(parent, s.platform, r),
                                fork_points.point_dir(child, s.platform, r), copy_function=fork_points.link_or_copy)
    for event in injections:
        append_injection(child, event)


def _injections(parent: Path, k: int, inject: str | None, platforms: list[str], asked_by: str) -> list[Injection]:
    """The parent's events of rounds <= K (the shared past; an unreadable file counts as none)
    and the fork's own event at round K+1."""
    try:
        kept = [e for e in read_injections(parent) if e.round <= k]
    except ValueError:
        kept = []
    if inject:
        kept.append(Injection(secrets.token_hex(4), k + 1, tuple(platforms), DEFAULT_SOURCE, inject, asked_by,
                              _utcnow()))
    return kept


async def fork_simulation(db: Database, config: Config, parent_id: str, from_round: int, *,
                          rounds: int | None = None, inject: str | None = None, asked_by: str = "",
                          viewer: Viewer | None = None, channel: str | None = None) -> Fork:
    """Create the fork of ``parent_id`` at round ``from_round`` (see the module docstring), asked
    for by ``viewer``, who must see the parent (engine.sim.records; None: the operator);
    ``channel``: where the fork reports (default: the parent's channel)."""
    parent = await records.row(db, parent_id)
    if parent is None or not visible(viewer, parent["scope"], parent["audience"]):
        raise ForkRefused(not_here(parent_id))
    run = await stored_run(db, parent_id)
    if run is None:
        raise ForkRefused(_("simulation {sim} has no run yet: a fork starts from a round its run completed.",
                            sim=parent_id))
    inject = (inject or "").strip() or None
    done = json.loads(run["rounds_done"])
    platforms = [p for p in PLATFORMS if p in done]
    completed = min((done[p] for p in platforms), default=0)
    if completed < 1:
        raise ForkRefused(_("simulation {sim} has not completed a round yet; nothing to fork from.", sim=parent_id))
    k = from_round
    if not 1 <= k <= completed:
        raise ForkRefused(_("round {round} is not a completed round of simulation {sim}: fork from round 1 to "
                            "{last}.", round=k, sim=parent_id, last=completed))
    folder = Path(parent["folder"])
    parent_cfg = SimulationConfig.model_validate_json((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    total = rounds if rounds is not None else parent_cfg.time.rounds
    if total > config.simulation.max_rounds:
        raise ForkRefused(_("--rounds {rounds} is above [simulation] max_rounds ({most}).", rounds=total,
                            most=config.simulation.max_rounds))
    if total <= k:
        raise ForkRefused(_("the fork must run past round {round}: give --rounds above {round} (the parent has "
                            "{rounds}).", round=k, rounds=parent_cfg.time.rounds))
    settled = run["status"] != "running"
    sources = _sources(folder, platforms, k, run, settled)
    if sources is None:
        usable = forkable_rounds(folder, platforms, completed if settled else None)
        raise ForkRefused(_("round {round} of simulation {sim} can no longer be forked from (its fork point was "
                            "thinned out to keep [simulation] fork_points_mb); rounds that can: {rounds}.", round=k,
                            sim=parent_id, rounds=fork_points.describe_rounds(usable)))
    sim_id = secrets.token_hex(4)
    child = (sims_dir(config) / sim_id).resolve()
    injections = _injections(folder, k, inject, platforms, asked_by)
    try:
        await asyncio.to_thread(_prepare_folder, folder, child, sim_id, k, total, sources, injections)
    except FileNotFoundError:
        await asyncio.to_thread(shutil.rmtree, child, True)
        raise ForkRefused(_("round {round}'s fork point of simulation {sim} was thinned out just now; /sim status "
                            "{sim} lists the rounds that can still be forked from.", round=k, sim=parent_id)) from None
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, child, True)
        raise
    spec = SimSpec(**{"documents": [], "requirement": parent["requirement"], **json.loads(parent["spec"] or "{}")})
    spec.rounds = total
    channel = channel or parent["channel"]
    await _register(db, parent, sim_id, child, spec, k, inject, {s.platform: s.actions for s in sources}, channel,
                    fork_audience(parent["audience"], viewer))
    return Fork(sim_id, parent_id, child, k, total, inject, parent["scope"], channel)


async def _register(db: Database, parent, sim_id: str, folder: Path, spec: SimSpec, k: int, event: str | None,
                    actions: dict[str, int], channel: str | None, audience: str) -> None:
    now = _utcnow()
    parent_id = parent["id"]
    async with db.transaction() as conn:
        await records.add_fork(conn, parent, sim_id, folder, spec, k, event, channel, audience, now)
        await share_steps(conn, db.dialect, parent_id, sim_id, now)
        await add_stopped_run(conn, sim_id, folder, parent["scope"], spec.rounds, {p: k for p in actions}, actions,
                              now)
        await copy_stances(conn, parent_id, sim_id, k)


def lineage(sim) -> str:
    """' ⑂ of `a3f2` at round 6 · +event: …' for a fork (a SimRecord or SimListing), '' for others."""
    if not sim.parent_id:
        return ""
    text = _(" ⑂ of `{sim}` at round {round}", sim=sim.parent_id, round=sim.fork_round)
    if sim.fork_event:
        event = sim.fork_event
        text += _(" · +event: {event}", event=event if len(event) <= 60 else event[:59] + "…")
    return text
