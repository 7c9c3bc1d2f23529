"""Simulation runs as the engine sees them: start or resume, follow, stop, interview.

State lives in the ``sim_runs`` table (status, rounds done per platform, pid) and in the
checkpoints the child writes after every round, never in the executor. A run whose process is
lost (bot restart, kill -9) is resumed from its last completed round with the agents' memories
as they were then; when no usable checkpoint exists it starts over from round 1 and says why.

Each run names the process whose child serves it (``owner``, see engine.owners). Another process
on the same database never signals that child nor runs the simulation alongside it: only once
the owner is gone is its child ended as a stray and the run recovered.

LLM budgets hold during a run (``accounting``): the child is told what the job's and the
scope's caps still allow and stops at the end of the round in which it reaches one; the usage
it reports as it goes is recorded at once, and a cap reached meanwhile (the scope's other jobs
spend too) stops it the same way. A run stopped at a cap, or one whose cap is still reached,
ends its job with a message that names the cap, the usage and the key to raise.

This module owns ``sim_runs`` and ``sim_interviews`` (tests/test_sql_owners.py); others read a
run's row through ``stored_run`` and ``job_and_scope``, and a fork registers its stopped run with
``add_stopped_run``.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from engine.db import Database
from engine.i18n import N_, _
from engine.jobs import JobError, JobStopped, utcnow
from engine.llm.errors import BudgetExceeded
from engine.llm.usage import Allowance
from engine.owners import ProcessOwner
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig
from engine.sim.run.executor import Executor, RunGone, RunHandle, RunTimeout, end_stray_child
from engine.sim.run.observers import RoundDone, RoundFeed, RoundObserver
from engine.sim.run.output import PLATFORMS, platform_db
from engine.sim.run.protocol import SPEC_FILE, RunSpec
from engine.words import plural

if TYPE_CHECKING:
    from engine.sim.run.accounting import RunUsage

log = logging.getLogger(__name__)

Progress = Callable[..., Awaitable[None]]  # JobContext.progress(fraction, message, **data)
LIVE = ("running", "idle")
# How each status of a run reads in a chat (translated where shown: ``RunState.describe``).
STATUS_NAMES = {"running": N_("running"), "idle": N_("idle"), "completed": N_("completed"),
                "stopped": N_("stopped"), "failed": N_("failed"), "interrupted": N_("interrupted"),
                "cancelled": N_("cancelled")}


class RunUnreachable(JobError):
    """The run's agents cannot be asked: its process is gone or cannot be reopened."""


@dataclass
class RunSettings:
    """The ``[simulation]`` keys the run step uses (see config.toml)."""
    max_rounds: int = 72
    idle_s: float = 600.0
    stop_timeout_s: float = 60.0
    interview_timeout_s: float = 180.0
    start_timeout_s: float = 120.0
    memory_rounds: int = 5
    max_steps_per_round: int = 3
    follow_density: float = 0.2
    llm_concurrency: int = 64
    context_tokens: int = 8192
    progress_interval_s: float = 2.0
    log_level: str = "WARNING"
    fork_points_mb: float = 512.0
    lost_restarts: int = 2   # a run whose host was lost (a Ray node died) is resumed this often


@dataclass
class LLMTarget:
    base_url: str
    model: str
    api_key_env: str = ""
    timeout_s: float = 120.0


@dataclass
class Answer:
    sim_id: str
    platform: str
    agent_id: int
    name: str
    question: str
    answer: str | None
    error: str | None
    round: int


@dataclass
class RunState:
    sim_id: str
    folder: str
    status: str
    rounds_total: int
    rounds_done: dict[str, int]
    actions: dict[str, int]
    job_id: str | None
    pid: int | None
    restart_reason: str
    error: str | None
    live: bool = False

    @classmethod
    def from_row(cls, row, live: bool = False) -> "RunState":
        return cls(sim_id=row["sim_id"], folder=row["folder"], status=row["status"],
                   rounds_total=row["rounds_total"], rounds_done=json.loads(row["rounds_done"]),
                   actions=json.loads(row["actions"]), job_id=row["job_id"], pid=row["pid"],
                   restart_reason=row["restart_reason"], error=row["error"], live=live)

    def describe(self) -> str:
        """The run's status line in the current language: "running: rounds twitter 3/10, reddit 2/10; 41 actions"."""
        rounds = ", ".join(f"{p} {k}/{self.rounds_total}" for p, k in self.rounds_done.items()) or _("not started")
        status = _(STATUS_NAMES[self.status]) if self.status in STATUS_NAMES else self.status
        text = _("{status}: rounds {rounds}; {actions}", status=status, rounds=rounds,
                 actions=plural(sum(self.actions.values()), "{n} action", "{n} actions"))
        if self.restart_reason:
            text += f"; {self.restart_reason}"
        if self.error:
            text += f"; {self.error}"
        return text


@dataclass
class _Follow:
    """What the parent has seen of a run's events."""
    rounds_total: int = 0
    rounds_done: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    posts: list[dict] = field(default_factory=list)
    error: str = ""
    restart_reason: str = ""
    done_status: str = ""
    stop_reason: str = ""
    folder: Path = Path(".")
    job_id: str | None = None
    scope: str | None = None
    budget_stop: str = ""   # the cap that made the parent stop the run, once it did
    feed: RoundFeed | None = None  # completed rounds, on their way to the round observers
    injected: dict[str, dict] = field(default_factory=dict)  # injected event id -> its first ``injected`` event
    lost: str = ""          # why the run's host was lost (the executor could not reach it any more)
    restarts: int = 0       # times it was resumed elsewhere after that


async def stored_run(db: Database, sim_id: str) -> Any:
    """The ``sim_runs`` row of ``sim_id`` as it is stored; None when it has no run."""
    return await db.fetchone("SELECT * FROM sim_runs WHERE sim_id = ?", (sim_id,))


async def job_and_scope(db: Database, sim_id: str) -> tuple[str | None, str | None]:
    """The job and the scope the run of ``sim_id`` counts for ((None, None) without a run)."""
    row = await db.fetchone("SELECT job_id, scope FROM sim_runs WHERE sim_id = ?", (sim_id,))
    return (row["job_id"], row["scope"]) if row is not None else (None, None)


async def add_stopped_run(conn: Any, sim_id: str, folder: Path, scope: str, rounds_total: int | None,
                          rounds_done: dict[str, int], actions: dict[str, int], now: str) -> None:
    """Within a transaction (``conn``): a run of ``sim_id`` stopped after ``rounds_done``, which
    the run step resumes (a fork's, engine.sim.fork)."""
    await conn.execute(
        "INSERT INTO sim_runs(sim_id, folder, job_id, scope, status, rounds_total, rounds_done, actions,"
        " started_at, updated_at) VALUES (?,?,NULL,?,'stopped',?,?,?,?,?)",
        (sim_id, str(folder), scope, rounds_total, json.dumps(rounds_done), json.dumps(actions), now, now))


def run_summary(result: dict) -> dict:
    """What step 4 records of one finished run (``SimRuns.run``'s result)."""
    summary = {"rounds": result["rounds"], "actions": sum(result["actions"].values())}
    summary.update({f"{p} actions": n for p, n in sorted(result["actions"].items())})
    if result["restart_reason"]:
        summary["restart"] = result["restart_reason"]
    return summary


class SimRuns:
    def __init__(self, db: Database, executor: Executor, llm: LLMTarget, settings: RunSettings | None = None,
                 owner: ProcessOwner | None = None, usage: RunUsage | None = None,
                 observers: list[RoundObserver] | None = None):
        self.db = db
        self.executor = executor
        self.llm = llm
        self.settings = settings or RunSettings()
        # Without an owner given, the service is a process owner of its own, released at close.
        self.owner = owner or ProcessOwner(db)
        self._owns_owner = owner is None
        self.usage = usage  # None: the runs' LLM usage is neither recorded nor capped
        self.observers: list[RoundObserver] = list(observers or [])  # see engine.sim.run.observers
        self._locks: dict[str, asyncio.Lock] = {}
        self._stopping: set[str] = set()
        self._background: dict[str, asyncio.Task] = {}  # sim_id -> follower of an idle run
        self._background_stops: set[asyncio.Task] = set()

    # -- state ----------------------------------------------------------------------------

    async def get(self, sim_id: str) -> RunState | None:
        row = await self.db.fetchone("SELECT * FROM sim_runs WHERE sim_id = ?", (sim_id,))
        if row is None:
            return None
        return RunState.from_row(row, live=await self.executor.attach(sim_id) is not None)

    async def _set(self, sim_id: str, **values: Any) -> None:
        for key in ("rounds_done", "actions"):
            if key in values:
                values[key] = json.dumps(values[key])
        values["updated_at"] = utcnow()
        cols = ", ".join(f"{k} = ?" for k in values)
        # a run's rounds and status wait for a restarting database server (at most a lease)
        await self.owner.outlasting(lambda: self.db.execute(f"UPDATE sim_runs SET {cols} WHERE sim_id = ?",
                                                            (*values.values(), sim_id)), f"simulation {sim_id}")

    async def elsewhere(self, sim_id: str) -> str | None:
        """Which other live process serves this simulation's run ('another bot process (pid …)'),
        or None when none does."""
        row = await self.db.fetchone("SELECT status, owner FROM sim_runs WHERE sim_id = ?", (sim_id,))
        if row is None or row["status"] not in LIVE or row["owner"] == self.owner.id:
            return None
        if await self.owner.gone(row["owner"]):
            return None
        return await self.owner.describe(row["owner"])

    async def recover(self) -> list[str]:
        """At start-up: the runs a gone process left behind. One left 'running' was cut off
        mid-round and is interrupted; one left 'idle' had finished its last round and was only
        waiting for interviews, so it is completed, not interrupted. Stray children, if any, are
        ended so a resume never shares a folder with them. Runs of live processes are left alone.
        Returns the interrupted runs only."""
        rows = await self.db.fetchall("SELECT * FROM sim_runs WHERE status IN ('running', 'idle')")
        interrupted = []
        for row in rows:
            if await self.elsewhere(row["sim_id"]) is not None:
                continue
            await end_stray_child(row["pid"], Path(row["folder"]))
            if self.usage is not None:
                await self.usage.reconcile(row["sim_id"], Path(row["folder"]))
            if row["status"] == "idle":
                await self._set(row["sim_id"], status="completed", pid=None)
            else:
                await self._set(row["sim_id"], status="interrupted", pid=None)
                interrupted.append(row["sim_id"])
        return interrupted

    # -- running ----------------------------------------------------------------------------

    def _spec(self, mode: str, caps: Sequence[Allowance] = ()) -> RunSpec:
        s = self.settings
        return RunSpec(caps=[{"cap": a.cap, "unit": a.unit, "left": a.left} for a in caps],
                       price=self.usage.price() if self.usage is not None else [0.0, 0.0],
                       base_url=self.llm.base_url, model=self.llm.model, api_key_env=self.llm.api_key_env,
                       mode=mode, max_rounds=s.max_rounds, idle_s=s.idle_s, memory_rounds=s.memory_rounds,
                       max_steps_per_round=s.max_steps_per_round, follow_density=s.follow_density,
                       llm_concurrency=s.llm_concurrency, timeout_s=self.llm.timeout_s,
                       context_tokens=s.context_tokens, log_level=s.log_level, fork_points_mb=s.fork_points_mb)

    def _lock(self, sim_id: str) -> asyncio.Lock:
        return self._locks.setdefault(sim_id, asyncio.Lock())

    async def run(self, sim_id: str, folder: Path, progress: Progress, job_id: str | None = None,
                  scope: str | None = None) -> dict:
        """Run (or resume) the simulation in ``folder`` until its last round; the environment
        then stays open for interviews for ``idle_s`` seconds. Raises JobError when the run is
        stopped, fails or its process dies (BudgetExceeded when a cap stopped it or holds it);
        cancelling the caller terminates the process. Its LLM usage counts for ``job_id`` and
        ``scope``."""
        folder = Path(folder).resolve()
        cfg = SimulationConfig.model_validate_json((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        rounds_total = min(cfg.time.rounds, self.settings.max_rounds)
        async with self._lock(sim_id):
            if await self.executor.attach(sim_id) is not None:
                raise JobError(_("simulation {sim} is already running", sim=sim_id))
            if (where := await self.elsewhere(sim_id)) is not None:
                raise JobError(_("simulation {sim} is running in {where}; it cannot run here at the same time",
                                 sim=sim_id, where=where))
            row = await self.db.fetchone("SELECT * FROM sim_runs WHERE sim_id = ?", (sim_id,))
            if row is not None:
                await end_stray_child(row["pid"], folder)  # its owner is gone (or was this process)
                job_id, scope = job_id or row["job_id"], scope or row["scope"]
            caps = await self._budget_before_start(sim_id, folder, row is not None, job_id, scope)
            await self.owner.start()
            mode = "resume" if row is not None else "start"
            (folder / SPEC_FILE).write_text(self._spec(mode, caps).to_json(), encoding="utf-8")
            now = utcnow()
            await self.db.execute(
                "INSERT INTO sim_runs(sim_id, folder, job_id, scope, status, rounds_total, started_at, updated_at,"
                " owner) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(sim_id) DO UPDATE SET folder=excluded.folder,"
                " job_id=coalesce(excluded.job_id, sim_runs.job_id), scope=coalesce(excluded.scope, sim_runs.scope),"
                " status='running', rounds_total=excluded.rounds_total, error=NULL, updated_at=excluded.updated_at,"
                " owner=excluded.owner",
                (sim_id, str(folder), job_id, scope, "running", rounds_total, now, now, self.owner.id))
            self._stopping.discard(sim_id)
            handle = await self.executor.start(sim_id, folder)
            await self._set(sim_id, pid=handle.pid)
        state = _Follow(rounds_total=rounds_total, folder=folder, job_id=job_id, scope=scope,
                        actions=json.loads(row["actions"]) if row is not None else {})  # a resume counts on
        state.feed = RoundFeed(self.observers)
        ticker = asyncio.create_task(self._tick(state, progress))
        try:
            try:
                await self._follow_until_rounds_end(sim_id, handle, state)
                while state.lost:
                    handle = await self._resume_lost(sim_id, folder, state)
                    await self._follow_until_rounds_end(sim_id, handle, state)
            finally:
                await state.feed.drain()  # a failed run keeps what its completed rounds showed
        except asyncio.CancelledError:
            state.feed.cancel()
            await asyncio.shield(self._cancelled(sim_id, handle, state))
            raise
        finally:
            ticker.cancel()
        await progress(1.0, self._progress_text(state), **self._progress_data(state))
        return {"rounds": rounds_total, "rounds_done": state.rounds_done, "actions": state.actions,
                "restart_reason": state.restart_reason}

    async def _resume_lost(self, sim_id: str, folder: Path, state: _Follow) -> RunHandle:
        """The run's host was lost (its Ray node died): start it again, wherever the executor
        places it, from its last checkpoint; after ``lost_restarts`` times the run fails."""
        if state.restarts >= self.settings.lost_restarts:
            await self._ended(sim_id, state, None)
        state.restarts += 1
        log.warning("simulation %s: %s; resuming it from its last completed round (%d of %d)", sim_id,
                    state.lost, state.restarts, self.settings.lost_restarts)
        state.lost = ""
        async with self._lock(sim_id):
            caps = await self._budget_before_start(sim_id, folder, True, state.job_id, state.scope)
            (folder / SPEC_FILE).write_text(self._spec("resume", caps).to_json(), encoding="utf-8")
            handle = await self.executor.start(sim_id, folder)
            await self._set(sim_id, status="running", pid=handle.pid)
        return handle

    async def job(self, ctx) -> dict:
        """Handler of the ``sim_run`` job: params ``sim_id`` and ``folder``."""
        return await self.run(ctx.params["sim_id"], Path(ctx.params["folder"]), ctx.progress, job_id=ctx.id,
                              scope=ctx.job.scope)

    # -- budget -----------------------------------------------------------------------------

    async def _budget_before_start(self, sim_id: str, folder: Path, ran_before: bool, job_id: str | None,
                                   scope: str | None) -> list[Allowance]:
        """Record what earlier processes left unrecorded; refuse to start when a cap is reached;
        otherwise what each cap still allows (for the child)."""
        if self.usage is None:
            return []
        if ran_before:
            await self.usage.reconcile(sim_id, folder)
        if reached := await self.usage.over_budget(job_id, scope):
            raise BudgetExceeded(_("simulation {sim} cannot run on: {reached}; /sim resume {sim} continues once the "
                                   "budget allows", sim=sim_id, reached=reached))
        return await self.usage.allowances(job_id, scope)

    async def _saw_usage(self, sim_id: str, handle: RunHandle, state: _Follow | None, usage: dict | None) -> None:
        """Record the child's cumulative usage; stop the run at the end of its round when a cap
        is reached (the child holds the caps it was given; the scope's other jobs spend too)."""
        ledger = self.usage
        if ledger is None or not usage:
            return
        await self.owner.outlasting(lambda: ledger.saw(sim_id, usage), f"simulation {sim_id}")
        if state is None or state.budget_stop or sim_id in self._stopping:
            return
        job_id, scope = state.job_id, state.scope
        if reached := await self.owner.outlasting(lambda: ledger.over_budget(job_id, scope), f"simulation {sim_id}"):
            state.budget_stop = reached
            self._stopping.add(sim_id)
            task = asyncio.create_task(self._request_stop(handle, reached), name=f"sim-{sim_id}-budget-stop")
            self._background_stops.add(task)
            task.add_done_callback(self._background_stops.discard)

    @staticmethod
    async def _request_stop(handle: RunHandle, reason: str) -> None:
        try:
            await handle.request("stop", timeout=10.0, reason=f"at its LLM budget: {reason}")
        except (RunGone, RunTimeout, RuntimeError):
            pass  # it ended meanwhile

    async def _follow_until_rounds_end(self, sim_id: str, handle: RunHandle, state: _Follow) -> None:
        events = handle.events()
        async for event in events:
            kind = event["type"]
            if kind == "ready":
                state.rounds_total = event["rounds"]
                state.rounds_done = dict(event["rounds_done"])
                reasons = event.get("restart_reason") or {}
                if event["mode"] == "resume":
                    state.restart_reason = "; ".join(   # the child's reasons are msgids (child.main)
                        _("{platform} started over from round 1: {reason}", platform=p, reason=_(reasons[p]))
                        if p in reasons else _("{platform} resumed at round {round}", platform=p, round=k + 1)
                        for p, k in state.rounds_done.items())
                await self._set(sim_id, rounds_done=state.rounds_done, restart_reason=state.restart_reason,
                                rounds_total=state.rounds_total)
                for platform, done in sorted(state.rounds_done.items()):  # observers catch up after a resume
                    for number in range(1, done + 1):
                        self._observe(sim_id, platform, number, state)
            elif kind == "round_end":
                state.rounds_done[event["platform"]] = event["round"] + 1
                state.actions[event["platform"]] = event["actions_total"]
                state.posts = ([{**p, "platform": event["platform"]} for p in event.get("posts", [])]
                               + state.posts)[:5]
                await self._set(sim_id, rounds_done=state.rounds_done, actions=state.actions)
                self._observe(sim_id, event["platform"], event["round"] + 1, state)
                await self._saw_usage(sim_id, handle, state, event.get("usage"))
            elif kind == "usage":
                await self._saw_usage(sim_id, handle, state, event.get("usage"))
            elif kind == "injected":
                state.injected.setdefault(event["id"], event)
            elif kind == "error":
                state.error = event["message"]
            elif kind == "idle":
                await self._set(sim_id, status="idle")
                self._watch_in_background(sim_id, handle, events, state.folder)
                return
            elif kind == "done":
                state.done_status = event["status"]
                state.stop_reason = event.get("stop_reason") or ""
                await self._saw_usage(sim_id, handle, None, event.get("usage"))
            elif kind == "exit":
                if event.get("lost"):
                    state.lost = event["lost"]
                    return
                if self.usage is not None:
                    await self.usage.reconcile(sim_id, state.folder)
                await self._ended(sim_id, state, event["returncode"])
                return

    @staticmethod
    def _observe(sim_id: str, platform: str, number: int, state: _Follow) -> None:
        if state.feed is not None:
            state.feed.put(RoundDone(sim_id, state.folder, platform, number, state.job_id, state.scope))

    async def _ended(self, sim_id: str, state: _Follow, returncode: int | None) -> None:
        """The process ended before the idle time: a stop, a failure or a crash. Raises JobError."""
        done = min(state.rounds_done.values(), default=0)
        where = _("after round {done} of {total}", done=done, total=state.rounds_total)
        if state.done_status == "completed":
            await self._set(sim_id, status="completed", pid=None)
            return
        if state.done_status == "stopped" or (sim_id in self._stopping and returncode is not None):
            await self._set(sim_id, status="stopped", pid=None)
            if state.budget_stop or state.stop_reason.startswith("at its LLM budget"):
                # what the cap says now, with the whole last round recorded
                reached = (self.usage is not None and await self.usage.over_budget(state.job_id, state.scope)
                           or state.budget_stop or state.stop_reason)
                raise BudgetExceeded(_("simulation {sim} stopped {where}: {reached}; /sim resume {sim} continues "
                                       "from there once the budget allows", sim=sim_id, where=where, reached=reached))
            # the child's reasons are msgids (child.main)
            reason = _(state.stop_reason) if state.stop_reason else _("on request")
            if sim_id not in self._stopping:  # nobody asked: the run could not go on
                raise JobError(_("simulation {sim} stopped {where} {reason}; resume continues from there", sim=sim_id,
                                 where=where, reason=reason))
            raise JobStopped(_("stopped {where} {reason}; /sim resume {sim} continues from there", where=where,
                               reason=reason, sim=sim_id))
        if state.done_status == "failed" or state.error:
            await self._set(sim_id, status="failed", pid=None, error=state.error)
            raise JobError(_("simulation {sim} failed {where}: {error}", sim=sim_id, where=where,
                             error=state.error or _("see run.log")))
        how = (_("killed by signal {signal}", signal=-returncode) if returncode and returncode < 0
               else _("exit status {code}", code=returncode))
        error = _("the run process ended unexpectedly ({how}) {where}", how=how, where=where)
        if state.lost:
            error = _("{lost} {where} (it had been resumed elsewhere {times})", lost=state.lost, where=where,
                      times=plural(state.restarts, "{n} time", "{n} times"))
        await self._set(sim_id, status="failed", pid=None, error=error)
        raise JobError(_("simulation {sim}: {error}; resume continues from the last completed round", sim=sim_id,
                         error=error))

    async def _cancelled(self, sim_id: str, handle: RunHandle, state: _Follow) -> None:
        await handle.cancel()
        await self._set(sim_id, status="cancelled", pid=None)

    def _watch_in_background(self, sim_id: str, handle: RunHandle, events, folder: Path) -> None:
        """After the last round the child idles for interviews; record when it finally exits."""
        async def watch() -> None:
            async for event in events:
                if event["type"] in ("usage", "done"):
                    await self._saw_usage(sim_id, handle, None, event.get("usage"))
                elif event["type"] == "exit":
                    if self.usage is not None:
                        await self.usage.reconcile(sim_id, folder)
                    await self._set(sim_id, status="completed", pid=None)
        task = asyncio.create_task(watch(), name=f"sim-{sim_id}-idle")
        self._background[sim_id] = task
        task.add_done_callback(lambda t: self._background.pop(sim_id, None) if self._background.get(sim_id) is t
                               else None)

    # -- progress ---------------------------------------------------------------------------

    def _progress_text(self, s: _Follow) -> str:
        """The run's progress line, in the job's language (the ticker runs in the job's task)."""
        rounds = ", ".join(_("{platform} round {done}/{total}", platform=p, done=k, total=s.rounds_total)
                           for p, k in sorted(s.rounds_done.items()))
        text = (rounds or _("starting")) + " · " + plural(sum(s.actions.values()), "{n} action", "{n} actions")
        if s.posts:
            p = s.posts[0]
            text += "\n" + _("latest on {platform}: {name}: {content}", platform=p["platform"], name=p["name"],
                             content=p["content"][:120])
        for e in list(s.injected.values())[-3:]:
            text += "\n" + _("📰 round {round}: {source}: {text}", round=e["round"] + 1, source=e["source"],
                             text=e["text"][:120])
        return text

    def _progress_data(self, s: _Follow) -> dict:
        return {"rounds_total": s.rounds_total, "rounds_done": dict(s.rounds_done),
                "actions": dict(s.actions), "posts": list(s.posts)}

    async def _tick(self, state: _Follow, progress: Progress) -> None:
        """Publish progress at a steady rate, whatever the pace of events."""
        while True:
            platforms = max(len(state.rounds_done), 1)
            fraction = (sum(state.rounds_done.values()) / (state.rounds_total * platforms)
                        if state.rounds_total else None)
            try:
                await progress(fraction, self._progress_text(state), **self._progress_data(state))
            except Exception:
                log.exception("progress report failed")
            await asyncio.sleep(self.settings.progress_interval_s)

    # -- control ----------------------------------------------------------------------------

    async def stop(self, sim_id: str) -> bool:
        """Stop at the end of the current round (terminating after ``stop_timeout_s``).
        False when no process runs this simulation."""
        handle = await self.executor.attach(sim_id)
        if handle is None:
            return False
        self._stopping.add(sim_id)
        await handle.stop(self.settings.stop_timeout_s)
        return True

    async def release(self, sim_id: str) -> bool:
        """End the idle time of a finished run now (its environment closes; it can be reopened)."""
        handle = await self.executor.attach(sim_id)
        if handle is None:
            return False
        try:
            await handle.request("close", timeout=10.0)
        except (RunGone, RunTimeout, RuntimeError):
            pass
        await handle.wait()
        if (watcher := self._background.get(sim_id)) is not None:
            await asyncio.wait([watcher], timeout=10)
        return True

    async def cancel(self, sim_id: str) -> bool:
        handle = await self.executor.attach(sim_id)
        if handle is None:
            return False
        await handle.cancel()
        await self._set(sim_id, status="cancelled", pid=None)
        return True

    # -- interviews -------------------------------------------------------------------------

    async def _reopen(self, sim_id: str) -> RunHandle:
        """Bring a finished run's environment back from its databases, for interviews."""
        state = await self.get(sim_id)
        if state is None:
            raise RunUnreachable(_("simulation {sim} has not run yet", sim=sim_id))
        if (where := await self.elsewhere(sim_id)) is not None:
            raise JobError(_("simulation {sim} is {status} in {where}; interview its agents there", sim=sim_id,
                             status=_(STATUS_NAMES.get(state.status, state.status)), where=where))
        folder = Path(state.folder)
        if not any(platform_db(folder, p).exists() for p in PLATFORMS):
            raise RunUnreachable(_("simulation {sim} has no databases to reopen", sim=sim_id))
        caps = await self._interview_allowances(sim_id, folder)
        (folder / SPEC_FILE).write_text(self._spec("reopen", caps).to_json(), encoding="utf-8")
        handle = await self.executor.start(sim_id, folder)
        async for event in handle.events():
            if event["type"] == "ready":
                return handle
            if event["type"] == "error":
                await handle.cancel()
                raise RunUnreachable(_("could not reopen simulation {sim}: {error}", sim=sim_id,
                                       error=event["message"]))
            if event["type"] == "exit":
                raise RunUnreachable(_("could not reopen simulation {sim} (see run.log)", sim=sim_id))
        raise RunUnreachable(_("could not reopen simulation {sim}", sim=sim_id))

    async def interview(self, sim_id: str, agent_ids: list[int] | None, question: str,
                        platforms: list[str] | None = None, asked_by: str = "",
                        timeout: float | None = None) -> list[Answer]:
        """Ask agents (None: all) on ``platforms`` (None: both) a question, during the run or after
        it (a finished run is reopened from its databases). Every answer is recorded."""
        question = question.strip()
        if not question:
            raise JobError(_("the question is empty"))
        bad = [p for p in platforms or [] if p not in PLATFORMS]
        if bad:
            raise JobError(_("unknown platform {platform}; use one of {platforms}", platform=repr(bad[0]),
                             platforms=", ".join(PLATFORMS)))
        async with self._lock(sim_id):
            handle = await self.executor.attach(sim_id)
            if handle is None:
                handle = await asyncio.wait_for(self._reopen(sim_id), self.settings.start_timeout_s)
            elif self.usage is not None:
                await self._interview_budget(sim_id)
        try:
            reply = await handle.request("interview", timeout or self.settings.interview_timeout_s,
                                         question=question, agent_ids=agent_ids,
                                         platforms=platforms or list(PLATFORMS))
        except (RunGone, RunTimeout) as err:
            raise RunUnreachable(str(err)) from None
        except RuntimeError as err:
            raise JobError(_("interview failed: {error}", error=err)) from None
        await self._saw_usage(sim_id, handle, None, reply.get("usage"))
        answers = [Answer(sim_id=sim_id, platform=a["platform"], agent_id=a["agent_id"], name=a["name"],
                          question=question, answer=a.get("answer"), error=a.get("error"), round=a["round"])
                   for a in reply["answers"]]
        now = utcnow()
        await self.db.executemany(
            "INSERT INTO sim_interviews(sim_id, platform, agent_id, agent_name, question, answer, error,"
            " round, asked_by, asked_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(a.sim_id, a.platform, a.agent_id, a.name, a.question, a.answer, a.error, a.round, asked_by, now)
             for a in answers])
        return answers

    async def interviews(self, sim_id: str, limit: int = 200) -> list[Answer]:
        rows = await self.db.fetchall(
            "SELECT * FROM sim_interviews WHERE sim_id = ? ORDER BY id LIMIT ?", (sim_id, limit))
        return [Answer(sim_id=r["sim_id"], platform=r["platform"], agent_id=r["agent_id"], name=r["agent_name"],
                       question=r["question"], answer=r["answer"], error=r["error"], round=r["round"])
                for r in rows]

    async def _interview_allowances(self, sim_id: str, folder: Path) -> list[Allowance]:
        """Before a finished run is reopened: what its earlier processes left unrecorded is
        recorded, and a reached cap refuses the interview."""
        if self.usage is None:
            return []
        await self.usage.reconcile(sim_id, folder)
        return await self.usage.allowances(*await self._interview_budget(sim_id))

    async def _interview_budget(self, sim_id: str) -> tuple[str | None, str | None]:
        """The run's job and scope; BudgetExceeded when they have no budget left for a question."""
        assert self.usage is not None  # asked only where runs account their usage
        job_id, scope = await self.usage.owner(sim_id)
        if reached := await self.usage.over_budget(job_id, scope):
            raise BudgetExceeded(_("no interview: {reached}", reached=reached))
        return job_id, scope

    async def close(self) -> None:
        for task in [*self._background.values(), *self._background_stops]:
            task.cancel()
        if self._owns_owner:
            await self.owner.release()
