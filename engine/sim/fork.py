"""Fork a simulation at a completed round: a new simulation that shares its parent's steps 1-3
and starts from the exact state after round K (both platforms' databases, every agent's memory,
the actions logged so far), optionally with an event injected at round K+1.

``fork_simulation`` registers the fork and prepares its folder; it makes no LLM call. What it
writes makes the pipeline go straight to the run, and the run resume from round K+1 exactly as
after a crash (``engine.sim.run.child`` ``_restore_files``, ``SimRuns.run``):

- a ``simulations`` row: new id, the parent's scope, channel and requirement, the spec with the
  fork's round count, lineage columns ``parent_id``, ``fork_round`` (K, 1-based), ``fork_event``;
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
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from engine.config import Config
from engine.db import Database
from engine.jobs import JobError
from engine.sim.envmodels import CONFIG_FILE, REDDIT_PROFILES, TWITTER_PROFILES, SimulationConfig
from engine.sim.injections import DEFAULT_SOURCE, Injection, append_injection, read_injections
from engine.sim.context import SimSpec
from engine.sim.records import sims_dir
from engine.sim.run import fork_points
from engine.sim.run.protocol import (ACTIONS_LOG, CHECKPOINT, CHECKPOINT_DB, MEMORY_FILE, PLATFORMS, platform_db,
                                     platform_dir)

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
    run = await db.fetchone("SELECT * FROM sim_runs WHERE sim_id=?", (sim_id,))
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
    for name in SHARED_FILES:
        if (parent / name).exists():
            fork_points.link_or_copy(parent / name, child / name)
    for name in SHARED_DIRS:
        if (parent / name).is_dir():
            shutil.copytree(parent / name, child / name, copy_function=fork_points.link_or_copy)
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
                          scope: str | None = None, channel: str | None = None) -> Fork:
    """Create the fork of ``parent_id`` at round ``from_round`` (see the module docstring).
    ``scope``, when given, must be the parent's (a chat sees only its own simulations);
    ``channel``: where the fork reports (default: the parent's channel)."""
    parent = await db.fetchone("SELECT * FROM simulations WHERE id=?", (parent_id,))
    if parent is None or (scope is not None and parent["scope"] != scope):
        raise ForkRefused(f"no simulation {parent_id} here. /sims lists them.")
    run = await db.fetchone("SELECT * FROM sim_runs WHERE sim_id=?", (parent_id,))
    if run is None:
        raise ForkRefused(f"simulation {parent_id} has no run yet: a fork starts from a round its run completed.")
    inject = (inject or "").strip() or None
    done = json.loads(run["rounds_done"])
    platforms = [p for p in PLATFORMS if p in done]
    completed = min((done[p] for p in platforms), default=0)
    if completed < 1:
        raise ForkRefused(f"simulation {parent_id} has not completed a round yet; nothing to fork from.")
    k = from_round
    if not 1 <= k <= completed:
        raise ForkRefused(f"round {k} is not a completed round of simulation {parent_id}: "
                          f"fork from round 1 to {completed}.")
    folder = Path(parent["folder"])
    parent_cfg = SimulationConfig.model_validate_json((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    total = rounds if rounds is not None else parent_cfg.time.rounds
    if total > config.simulation.max_rounds:
        raise ForkRefused(f"--rounds {total} is above [simulation] max_rounds ({config.simulation.max_rounds}).")
    if total <= k:
        raise ForkRefused(f"the fork must run past round {k}: give --rounds above {k} (the parent has "
                          f"{parent_cfg.time.rounds}).")
    settled = run["status"] != "running"
    sources = _sources(folder, platforms, k, run, settled)
    if sources is None:
        usable = forkable_rounds(folder, platforms, completed if settled else None)
        raise ForkRefused(f"round {k} of simulation {parent_id} can no longer be forked from (its fork point was "
                          f"thinned out to keep [simulation] fork_points_mb); rounds that can: "
                          f"{fork_points.describe_rounds(usable)}.")
    sim_id = secrets.token_hex(4)
    child = (sims_dir(config) / sim_id).resolve()
    injections = _injections(folder, k, inject, platforms, asked_by)
    try:
        await asyncio.to_thread(_prepare_folder, folder, child, sim_id, k, total, sources, injections)
    except FileNotFoundError:
        await asyncio.to_thread(shutil.rmtree, child, True)
        raise ForkRefused(f"round {k}'s fork point of simulation {parent_id} was thinned out just now; "
                          f"/sim status {parent_id} lists the rounds that can still be forked from.") from None
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, child, True)
        raise
    spec = SimSpec(**{"documents": [], "requirement": parent["requirement"], **json.loads(parent["spec"] or "{}")})
    spec.rounds = total
    channel = channel or parent["channel"]
    await _register(db, parent, sim_id, child, spec, k, inject, {s.platform: s.actions for s in sources}, channel)
    return Fork(sim_id, parent_id, child, k, total, inject, parent["scope"], channel)


async def _register(db: Database, parent, sim_id: str, folder: Path, spec: SimSpec, k: int, event: str | None,
                    actions: dict[str, int], channel: str | None) -> None:
    now = _utcnow()
    parent_id = parent["id"]
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at, parent_id, fork_round,"
            " fork_event) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (sim_id, parent["scope"], channel, parent["requirement"], json.dumps(asdict(spec)), str(folder),
             now, parent_id, k, event))
        await conn.execute(
            "INSERT INTO sim_steps(sim_id, step, summary, llm_calls, tokens, finished_at)"
            f" SELECT ?, step, summary, 0, 0, ? FROM sim_steps WHERE sim_id=? AND step IN ({','.join('?' * 3)}) ORDER BY rowid",
            (sim_id, now, parent_id, *SHARED_STEPS))
        cur = await conn.execute(
            "SELECT (SELECT coalesce(max(id), 0) FROM sim_entities) - coalesce(min(id), 0) + 1"
            " FROM sim_entities WHERE sim_id=?", (parent_id,))
        offset = (await cur.fetchone())[0]
        await conn.execute(
            "INSERT INTO sim_entities(id, sim_id, name, norm_name, type, summary, attributes, aliases, mentions,"
            " embedding) SELECT id + ?, ?, name, norm_name, type, summary, attributes, aliases, mentions, embedding"
            " FROM sim_entities WHERE sim_id=? ORDER BY id", (offset, sim_id, parent_id))
        if db.dialect == "postgresql":   # explicit ids leave the identity sequence behind them
            await conn.execute("SELECT setval(pg_get_serial_sequence('sim_entities', 'id'),"
                               " (SELECT max(id) FROM sim_entities))")
        await conn.execute(
            "INSERT INTO sim_edges(sim_id, source_id, target_id, relation, fact, valid_at, invalid_at, chunk,"
            " embedding) SELECT ?, source_id + ?, target_id + ?, relation, fact, valid_at, invalid_at, chunk,"
            " embedding FROM sim_edges WHERE sim_id=? ORDER BY id", (sim_id, offset, offset, parent_id))
        await conn.execute(
            "INSERT INTO sim_runs(sim_id, folder, job_id, scope, status, rounds_total, rounds_done, actions,"
            " started_at, updated_at) VALUES (?,?,NULL,?,'stopped',?,?,?,?,?)",
            (sim_id, str(folder), parent["scope"], spec.rounds, json.dumps({p: k for p in actions}),
             json.dumps(actions), now, now))
        await conn.execute(
            "INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label)"
            " SELECT ?, platform, round, agent_id, score, label FROM sim_stances WHERE sim_id=? AND round<=?",
            (sim_id, parent_id, k))


def lineage(sim) -> str:
    """' ⑂ of `a3f2` at round 6 · +event: …' for a fork (a SimRecord or SimListing), '' for others."""
    if not sim.parent_id:
        return ""
    text = f" ⑂ of `{sim.parent_id}` at round {sim.fork_round}"
    if sim.fork_event:
        event = sim.fork_event
        text += f" · +event: {event if len(event) <= 60 else event[:59] + '…'}"
    return text
