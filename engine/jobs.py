"""Background jobs: persisted, observable, cancellable, bounded, and honest after a restart.

A job kind is registered with an async handler ``handler(ctx: JobContext) -> dict | None``.
Every state change and progress report is written to the ``jobs`` table and fanned out to
subscribers (the chat adapters). States go queued -> running -> done, failed, cancelled,
interrupted or stopped (a handler that ends early because someone asked raises JobStopped);
every state but done can be resumed.

A job keeps the language it was started in (``Job.language``, engine.i18n's current language at
``submit``): its handler runs in it, so its progress lines, errors and results are written in the
language of the chat that asked, also when it is resumed or taken over after a restart.

Several processes may share the database (engine.owners): each job names the process that
runs it. At start-up only jobs whose owner is gone are marked 'interrupted' (and can be
resumed with ``resume``); a job another live process runs is left alone and cannot be resumed
or cancelled from here. While a process runs, its owner's heartbeat also takes over the jobs
of any process whose lease has expired (``take_over_expired``): they become 'interrupted' and
this process's, with an event that says so (``data["taken_over"]``), so a killed process's
work is picked up without waiting for a restart, and a live process's never (it renews).
Every write of a running job is conditional on its owner, so a process whose work was taken
over (it stalled past its lease) stops that job instead of overwriting.

Taking jobs over reads them and rewrites them in one write transaction (which never interleave
with another process's, engine.db); on PostgreSQL the rows are also claimed ``FOR UPDATE SKIP
LOCKED``, so a claim never waits on rows another process is claiming or writing.

Sharing. A process runs at most ``max_concurrent`` of its jobs at once; when a slot frees, the
next of its queued jobs is picked fairly, from what the shared database says of every process's
jobs: first the scope with the fewest running jobs, then the one whose last job started longest
ago (each job that starts takes the next ``turn``, a counter in the table), and within a scope
the same between the people who started them; the oldest job last. So one server or member that
queues many jobs gets one turn in a round, not the whole queue. And ``JobCaps`` bound how many
jobs may be queued or running at once per scope and per person (for every kind, and per kind:
simulations), counted in the transaction that inserts the job so that no two processes both let
the last one in; people the ``exempt`` predicate names (the bot's owners) have no cap. A job
counts for its ``weight`` (an ensemble of N simulation runs is one job that counts as N).

This module owns the ``jobs`` table: every statement on it is here (tests/test_sql_owners.py);
others read jobs through the runner or the free functions below, which take the database.
"""
from __future__ import annotations

import asyncio
import builtins
import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Awaitable, Callable

from engine.db import Database
from engine.i18n import N_, _, current, set_language, using
from engine.owners import ProcessOwner
from engine.words import plural

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED, INTERRUPTED, STOPPED = (
    "queued", "running", "done", "failed", "cancelled", "interrupted", "stopped")
FINAL_STATES = {DONE, FAILED, CANCELLED, INTERRUPTED, STOPPED}
UNFORESEEN = "unforeseen"   # in a failed job's result: it failed on an exception other than a JobError
# How each state reads in a chat (translated where shown: ``state_name``).
STATE_NAMES = {QUEUED: N_("queued"), RUNNING: N_("running"), DONE: N_("done"), FAILED: N_("failed"),
               CANCELLED: N_("cancelled"), INTERRUPTED: N_("interrupted"), STOPPED: N_("stopped")}


def state_name(state: str) -> str:
    """A job's state as the current language says it."""
    return _(STATE_NAMES[state]) if state in STATE_NAMES else state


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


async def params_in(db: Database, states: tuple[str, ...] | None) -> list[str | None]:
    """The stored parameters (JSON text) of every job in ``states``; None: of every job not done."""
    if states is None:
        rows = await db.fetchall("SELECT params FROM jobs WHERE state != ?", (DONE,))
    else:
        marks = ",".join("?" * len(states))
        rows = await db.fetchall(f"SELECT params FROM jobs WHERE state IN ({marks})", states)
    return [row["params"] for row in rows]


async def active_of_kind(db: Database, kind: str) -> list[tuple[str, str]]:
    """(id, parameters as JSON text) of every queued or running job of ``kind``."""
    rows = await db.fetchall(
        "SELECT id, params FROM jobs WHERE kind=? AND state IN (?,?)", (kind, QUEUED, RUNNING))
    return [(row["id"], row["params"]) for row in rows]


class JobError(Exception):
    """A job failed for a reason worth showing to the user (chats drop URLs and paths from it).
    ``resumable = False`` marks a failure that resuming would only repeat (a bad document): no
    resume is suggested for it."""

    resumable = True


class JobLimit(JobError):
    """A job was refused because its scope or its starter has as many queued or running as allowed."""

    resumable = False


@dataclass(frozen=True)
class JobCaps:
    """How many unfinished (queued or running) jobs one scope and one person may have; 0: no cap.
    ``count`` names how many in a refusal and ``keys`` are the config keys that set the caps."""
    per_scope: int = 0
    per_user: int = 0
    count: Callable[[int], str] = lambda n: plural(n, "{n} job", "{n} jobs")  # "3 jobs", translated
    keys: tuple[str, str] = ("[jobs] max_pending_per_scope", "[jobs] max_pending_per_user")


Exempt = Callable[[str, str], bool]  # (scope, started_by) -> whether the caps spare them


class JobStopped(JobError):
    """A job ended early because someone asked it to (it is 'stopped', not 'failed', and can be
    resumed); the text says where it stopped."""


@dataclass
class Job:
    id: str
    kind: str
    scope: str
    channel: str | None
    title: str
    params: dict[str, Any]
    state: str
    progress: float | None = None
    message: str = ""
    result: dict[str, Any] | None = None
    error: str | None = None
    created_at: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    started_by: str = ""  # author id of the person who started it; '' when the bot did
    owner: str | None = None  # owners.id of the process that runs (or last ran) it
    language: str = "en"  # the language it was started in, that it writes in (engine.i18n)

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def unforeseen(self) -> bool:
        """Whether it failed on an exception other than a JobError (a bug, a full disk): its error
        is the exception's type and text, for the operator rather than for a chat."""
        return self.state == FAILED and bool((self.result or {}).get(UNFORESEEN))

    @property
    def resumable(self) -> bool:
        """Whether resuming may help: not after a failure a JobError marked not resumable."""
        return self.state != DONE and (self.result or {}).get("resumable", True) is not False

    @classmethod
    def from_row(cls, row) -> "Job":
        return cls(
            id=row["id"], kind=row["kind"], scope=row["scope"], channel=row["channel"],
            title=row["title"], params=json.loads(row["params"] or "{}"), state=row["state"],
            progress=row["progress"], message=row["message"],
            result=json.loads(row["result"]) if row["result"] else None, error=row["error"],
            created_at=row["created_at"], started_at=row["started_at"], finished_at=row["finished_at"],
            started_by=row["started_by"],
            owner=row["owner"], language=row["language"],
        )


@dataclass
class JobEvent:
    job: Job
    kind: str  # 'state' or 'progress'
    data: dict[str, Any] = field(default_factory=dict)


Handler = Callable[["JobContext"], Awaitable[dict[str, Any] | None]]
Listener = Callable[[JobEvent], Awaitable[None] | None]


class JobContext:
    """What a running job sees: its parameters and a way to report progress."""

    def __init__(self, runner: "JobRunner", job: Job):
        self.runner = runner
        self.job = job

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def params(self) -> dict[str, Any]:
        return self.job.params

    async def progress(self, fraction: float | None, message: str, **data: Any) -> None:
        """Report progress (fraction in 0..1 or None) with a human-readable line."""
        self.job.progress = None if fraction is None else max(0.0, min(1.0, fraction))
        self.job.message = message
        await self.runner._save(self.job)
        await self.runner._emit(JobEvent(self.job, "progress", data))

    async def update_params(self, **changes: Any) -> None:
        """Persist extra parameters (a checkpoint the job needs if it is resumed)."""
        self.job.params.update(changes)
        await self.runner._save(self.job)


class JobRunner:
    def __init__(self, db: Database, max_concurrent: int = 2, owner: ProcessOwner | None = None,
                 caps: JobCaps = JobCaps(), exempt: Exempt | None = None):
        self.db = db
        # Without an owner given, the runner is a process owner of its own, released at shutdown.
        self.owner = owner or ProcessOwner(db)
        self._owns_owner = owner is None
        self._taken: set[str] = set()  # jobs another process took over while this one ran them
        self._handlers: dict[str, Handler] = {}
        self._kind_caps: dict[str, JobCaps] = {}
        self.caps = caps
        self.exempt = exempt
        self._tasks: dict[str, asyncio.Task] = {}
        self._listeners: list[Listener] = []
        self._watchers: dict[str, list[asyncio.Queue]] = {}
        self._free = max_concurrent   # slots not given to a job
        self._waiting: dict[str, tuple[Job, asyncio.Future]] = {}  # queued here, in the order they came
        self._picker: asyncio.Task | None = None
        self._repick = False
        self._closing = False
        self._unsaved: dict[str, Job] = {}  # jobs that ended while the database could not be reached
        self.owner.after_renew.append(self._save_unsaved)
        self.owner.after_renew.append(self.take_over_expired)

    def register(self, kind: str, handler: Handler, caps: JobCaps | None = None) -> None:
        """``caps``: how many jobs of this kind a scope and a person may have queued or running,
        besides the runner's caps for all kinds."""
        self._handlers[kind] = handler
        if caps is not None:
            self._kind_caps[kind] = caps

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every event of every job; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def recover(self) -> list[Job]:
        """At start-up: jobs left 'running' or 'queued' by a process that is gone become
        'interrupted' (and this process their owner); those of live processes are left alone."""
        await self.owner.start()
        jobs = await self._take_over_orphans(N_("interrupted by a restart"), lease_only=False)
        for job in jobs:
            log.warning("job %s (%s) was interrupted by a restart", job.id, job.kind)
        return jobs

    async def _save_unsaved(self) -> None:
        """Save the end of jobs that finished while the database could not be reached (run by the
        owner's heartbeat after a renewal: the database answers again)."""
        for job_id, job in list(self._unsaved.items()):
            await self._finish(job)
            self._unsaved.pop(job_id, None)

    async def take_over_expired(self) -> list[Job]:
        """While this process runs: jobs left 'running' or 'queued' by a process whose lease has
        expired become 'interrupted' and this process's (run by the owner's heartbeat). Each
        gets a state event with ``data["taken_over"]``."""
        jobs = await self._take_over_orphans(N_("interrupted: the bot process that ran it stopped"),
                                             lease_only=True)
        for job in jobs:
            log.warning("job %s (%s) of a bot process whose lease expired was taken over as interrupted",
                        job.id, job.kind)
            await self._emit(JobEvent(job, "state", {"taken_over": True}))
        return jobs

    async def _take_over_orphans(self, message: str, lease_only: bool) -> list[Job]:
        """Mark 'interrupted', owned by this process, the running or queued jobs whose owner has
        ended (engine.owners ``ended``; with ``lease_only``, only by an expired lease); ``message``
        is a msgid, written in each job's language."""
        skip_locked = " FOR UPDATE OF jobs SKIP LOCKED" if self.db.dialect == "postgresql" else ""
        taken = []
        async with self.db.transaction() as conn:
            async with conn.execute(
                "SELECT jobs.*, owners.host AS owner_host, owners.pid AS owner_pid,"
                " owners.pid_started AS owner_pid_started, owners.lease_until AS owner_lease_until"
                " FROM jobs LEFT JOIN owners ON owners.id = jobs.owner"
                " WHERE jobs.state IN (?, ?) AND jobs.owner IS DISTINCT FROM ?" + skip_locked,
                    (RUNNING, QUEUED, self.owner.id)) as cur:
                rows = await cur.fetchall()
            for row in rows:
                holder = None if row["owner_host"] is None else {
                    "host": row["owner_host"], "pid": row["owner_pid"], "pid_started": row["owner_pid_started"],
                    "lease_until": row["owner_lease_until"]}
                if not self.owner.ended(holder, lease_only):
                    continue
                job = Job.from_row(row)
                with using(job.language):
                    seen, job.state, job.finished_at, job.message = job.state, INTERRUPTED, utcnow(), _(message)
                previous, job.owner = job.owner, self.owner.id
                if (await conn.execute(*self._update(job, previous, seen))).rowcount == 1:
                    taken.append(job)
        return taken

    async def submit(self, kind: str, params: dict[str, Any], scope: str,
                     channel: str | None = None, title: str = "", started_by: str = "", weight: int = 1) -> Job:
        """Queue a job; ``started_by`` is the author id of the person asking for it; it counts for
        ``weight`` jobs against the caps. The job writes in the current language (engine.i18n)."""
        if kind not in self._handlers:
            raise ValueError(f"unknown job kind: {kind}")
        await self.owner.start()
        now = utcnow()
        job = Job(id=secrets.token_hex(4), kind=kind, scope=scope, channel=channel,
                  title=title or kind, params=dict(params), state=QUEUED, created_at=now, started_by=started_by,
                  owner=self.owner.id, language=current())
        async with self.db.transaction() as conn:
            await self._within_caps(conn, kind, scope, started_by, weight)
            await conn.execute(
                "INSERT INTO jobs(id, kind, scope, channel, title, params, state, message, created_at, updated_at,"
                " started_by, owner, language, weight) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (job.id, kind, scope, channel, job.title, json.dumps(job.params), QUEUED, "", now, now, started_by,
                 job.owner, job.language, weight))
        self._start(job)
        return job

    async def check_caps(self, kind: str, scope: str, started_by: str, weight: int = 1) -> None:
        """Raise JobLimit now if a job of ``kind`` (counting for ``weight``) would be refused (before
        work that leads to one)."""
        async with self.db.transaction() as conn:
            await self._within_caps(conn, kind, scope, started_by, weight)

    async def _within_caps(self, conn, kind: str, scope: str, started_by: str, weight: int = 1) -> None:
        if self.exempt is not None and self.exempt(scope, started_by):
            return
        platform = scope.partition(":")[0]
        for caps, kinds in ((self._kind_caps.get(kind), [kind]), (self.caps, [])):
            if caps is None:
                continue
            only = " AND kind = ?" if kinds else ""
            # a kind's caps count the weight of its jobs; the caps of all jobs count jobs
            count, counts = ("coalesce(sum(weight), 0)", weight) if kinds else ("count(*)", 1)
            checks = [(caps.per_scope, "scope = ?", [scope], N_(
                "this server or chat already has {jobs} queued or running, the most it may ({key}); wait for one "
                "to finish, or /cancel one (/jobs lists them)."), N_(
                "this counts as {jobs} and this server or chat may have at most {cap} queued or running ({key}; "
                "{now} now): ask for fewer, or wait for one to finish."), caps.keys[0])]
            if started_by:
                checks.append((caps.per_user, "started_by = ? AND scope LIKE ?", [started_by, f"{platform}:%"], N_(
                    "you already have {jobs} queued or running, the most one person may ({key}); wait for one to "
                    "finish, or /cancel one (/jobs lists them)."), N_(
                    "this counts as {jobs} and you may have at most {cap} queued or running ({key}; {now} now): ask "
                    "for fewer, or wait for one to finish."), caps.keys[1]))
            for cap, where, args, refusal, weighed, key in checks:
                if not cap:
                    continue
                async with conn.execute(f"SELECT {count} FROM jobs WHERE {where} AND state IN (?, ?){only}",
                                        [*args, QUEUED, RUNNING, *kinds]) as cur:
                    n = int((await cur.fetchone())[0])
                if counts > 1 and n + counts > cap:
                    raise JobLimit(_(weighed, jobs=caps.count(counts), cap=cap, key=key, now=n))
                if n >= cap:
                    raise JobLimit(_(refusal, jobs=caps.count(n), key=key))

    async def resume(self, job_id: str) -> Job:
        """Run an interrupted or failed job again with its saved parameters and checkpoints."""
        job = await self.get(job_id)
        if job is None:
            raise JobError(_("no job {job}", job=job_id))
        if job.state in (RUNNING, QUEUED):
            if job.id in self._tasks or job.owner == self.owner.id:
                raise JobError(_("job {job} is already {state}", job=job_id, state=state_name(job.state)))
            if (where := await self.elsewhere(job)) is not None:
                raise JobError(_("job {job} is {state} in {where}; it cannot be resumed while that process runs it",
                                 job=job_id, state=state_name(job.state), where=where))
            # its process is gone and no restart has recovered it yet: take it over now
        elif job.state not in (INTERRUPTED, FAILED, CANCELLED, STOPPED):
            raise JobError(_("job {job} is {state}; only interrupted, failed, stopped or cancelled jobs resume",
                             job=job_id, state=state_name(job.state)))
        else:
            await self.check_caps(job.kind, job.scope, job.started_by)
        await self.owner.start()
        with using(job.language):
            resuming = _("resuming")
        seen, job.state, job.error, job.finished_at, job.message = job.state, QUEUED, None, None, resuming
        job.result = None
        if not await self._take_over(job, seen):
            raise JobError(_("job {job} was resumed by another bot process just now", job=job_id))
        self._start(job)
        return job

    def _start(self, job: Job) -> None:
        self._tasks[job.id] = asyncio.create_task(self._run(job), name=f"job-{job.id}")

    async def _run(self, job: Job) -> None:
        set_language(job.language)   # this task's own context: what the job writes is in its language
        ctx = JobContext(self, job)
        slot = False
        try:
            await self._emit(JobEvent(job, "state"))
            await self._turn(job)   # the job is 'running' once its turn comes
            slot = True
            await self._emit(JobEvent(job, "state"))
            result = await self._handlers[job.kind](ctx)
            job.state, job.result, job.progress = DONE, result or {}, 1.0
        except asyncio.CancelledError:
            if job.id in self._taken:
                job.state, job.message = INTERRUPTED, _("taken over by another bot process")
            elif self._closing:
                job.state, job.message = INTERRUPTED, _("interrupted by shutdown")
            else:
                job.state, job.message = CANCELLED, _("cancelled")
        except JobStopped as err:
            job.state, job.message = STOPPED, str(err)
        except JobError as err:
            job.state, job.error = FAILED, str(err)
            if not err.resumable:
                job.result = {"resumable": False}
        except Exception as err:
            if self.db.unreachable(err):   # its writes waited a lease for the database in vain
                log.warning("job %s (%s) was interrupted: the database could not be reached (%s)",
                            job.id, job.kind, type(err).__name__)
                job.state, job.message = INTERRUPTED, _("interrupted: the database could not be reached")
            else:   # a bug or an unexpected failure: keep the job record honest
                log.exception("job %s (%s) failed", job.id, job.kind)
                job.state, job.error = FAILED, f"{type(err).__name__}: {err}"
                job.result = {**(job.result or {}), UNFORESEEN: True}
        finally:
            job.finished_at = utcnow()
            self._tasks.pop(job.id, None)
            try:
                await asyncio.shield(self._finish(job))
            except Exception as err:
                if not self.db.unreachable(err):
                    raise
                # saved once the database answers again (the heartbeat's next renewal)
                log.warning("job %s (%s) ended %s; its state is saved once the database is back",
                            job.id, job.kind, job.state)
                self._unsaved[job.id] = job
            finally:
                self._taken.discard(job.id)
                if slot:   # once it is saved finished, so the next pick sees it is no longer running
                    self._release()

    # -- the fair queue -----------------------------------------------------------------------

    async def _turn(self, job: Job) -> None:
        """Wait until ``job`` is given a slot (and saved as running, with its turn)."""
        given = asyncio.get_running_loop().create_future()
        self._waiting[job.id] = (job, given)
        self._pick()
        try:
            await given
        except asyncio.CancelledError:
            if self._waiting.pop(job.id, None) is None and given.done() and not given.cancelled():
                self._release()   # its slot came just as it was cancelled
            raise

    def _release(self) -> None:
        self._free += 1
        self._pick()

    def _pick(self) -> None:
        """Give free slots to waiting jobs, fairest first (in a task: it reads the database)."""
        if self._picker is None or self._picker.done():
            self._picker = asyncio.create_task(self._give_turns(), name="jobs-picker")
        else:
            self._repick = True

    async def _give_turns(self) -> None:
        while True:
            self._repick = False
            while self._free > 0 and (waiting := [j for j, given in self._waiting.values() if not given.done()]):
                job = await self._fairest(waiting)
                job, given = self._waiting.pop(job.id)
                if given.done():
                    continue
                self._free -= 1
                try:
                    job.state, job.started_at = RUNNING, utcnow()
                    await self._save(job, turn=True)
                except Exception as err:
                    self._free += 1
                    if not given.done():
                        given.set_exception(err)
                    continue
                if given.done():   # cancelled while its turn was written
                    self._free += 1
                else:
                    given.set_result(None)
            if not self._repick:
                return

    async def _fairest(self, waiting: list[Job]) -> Job:
        """The waiting job to run next: its scope has the fewest running jobs (in every process),
        then the oldest last turn; within the scope the same for its starter; then the oldest."""
        scopes = sorted({j.scope for j in waiting})
        try:
            rows = await self.db.fetchall(
                "SELECT scope, started_by, sum(CASE WHEN state = ? THEN 1 ELSE 0 END) AS running,"
                " max(turn) AS last_turn FROM jobs WHERE scope IN (" + ",".join("?" * len(scopes)) + ")"
                " GROUP BY scope, started_by", [RUNNING, *scopes])
        except Exception:   # the order is a courtesy: never leave a slot unused for it
            log.exception("could not read the job queue's turns; taking the oldest job")
            rows = []
        # (running jobs, last turn) per (scope, starter) and per scope
        person: dict[tuple[str, str], tuple[int, int]] = {}
        scope: dict[str, tuple[int, int]] = {}
        for row in rows:
            running, turn = int(row["running"] or 0), int(row["last_turn"] or 0)
            person[row["scope"], row["started_by"]] = (running, turn)
            had = scope.get(row["scope"], (0, 0))
            scope[row["scope"]] = (had[0] + running, max(had[1], turn))
        order = {j.id: i for i, j in enumerate(waiting)}
        return min(waiting, key=lambda j: (scope.get(j.scope, (0, 0)), person.get((j.scope, j.started_by), (0, 0)),
                                           j.created_at, order[j.id]))

    async def _finish(self, job: Job) -> None:
        await self._save(job)
        await self._emit(JobEvent(job, "state"))
        for queue in self._watchers.pop(job.id, []):
            queue.put_nowait(None)

    async def cancel(self, job_id: str) -> bool:
        """Cancel a job this process runs; False when it runs nowhere. A job that another live
        process runs is refused with JobError (it can only be cancelled there)."""
        task = self._tasks.get(job_id)
        if task is None:
            job = await self.get(job_id)
            if job is not None and (where := await self.elsewhere(job)) is not None:
                raise JobError(_("job {job} runs in {where}; cancel it there", job=job_id, where=where))
            return False
        task.cancel()
        await asyncio.wait([task])
        return True

    async def elsewhere(self, job: Job) -> str | None:
        """Which other live process runs ``job`` ('another bot process (pid …)'), or None."""
        if job.state not in (RUNNING, QUEUED) or job.owner == self.owner.id or await self.owner.gone(job.owner):
            return None
        return await self.owner.describe(job.owner)

    async def get(self, job_id: str) -> Job | None:
        row = await self.db.fetchone("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return Job.from_row(row) if row else None

    async def list(self, scope: str | None = None, limit: int = 20, kind: str | None = None) -> list[Job]:
        sql = "SELECT * FROM jobs WHERE 1=1"
        args: list[Any] = []
        if scope is not None:
            sql += " AND scope = ?"
            args.append(scope)
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        args.append(limit)
        return [Job.from_row(r) for r in await self.db.fetchall(sql, args)]

    async def changed_since(self, scope: str, kind: str, since: str) -> builtins.list[Job]:
        """Jobs of ``kind`` in ``scope`` created or finished at or after ``since``, oldest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM jobs WHERE scope=? AND kind=? AND (created_at>=? OR finished_at>=?)"
            " ORDER BY created_at", (scope, kind, since, since))
        return [Job.from_row(r) for r in rows]

    async def watch(self, job_id: str) -> AsyncIterator[JobEvent]:
        """Yield this job's events until it finishes."""
        queue: asyncio.Queue = asyncio.Queue()
        if job_id not in self._tasks:
            return
        self._watchers.setdefault(job_id, []).append(queue)
        while (event := await queue.get()) is not None:
            yield event

    async def wait(self, job_id: str) -> Job | None:
        task = self._tasks.get(job_id)
        if task is not None:
            await asyncio.wait([task])
        return await self.get(job_id)

    async def shutdown(self) -> None:
        """Interrupt every running job cleanly (their state is saved as 'interrupted')."""
        self._closing = True
        if self._picker is not None:
            self._picker.cancel()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._owns_owner:
            await self.owner.release()

    async def _save(self, job: Job, turn: bool = False) -> None:
        """Write the job (``turn``: it starts now and takes the next turn of the fair queue)."""
        if await self._write(job, job.owner, turn=turn) or job.id not in self._tasks or job.id in self._taken:
            return
        # Another process found this one gone (it stalled past its lease) and took the job over.
        log.warning("job %s (%s) was taken over by another bot process; stopping it here", job.id, job.kind)
        self._taken.add(job.id)
        self._tasks[job.id].cancel()

    async def _take_over(self, job: Job, seen_state: str) -> bool:
        """Save ``job`` as owned by this process, unless another process (or another call here)
        changed its owner or its state ``seen_state`` first."""
        holder, job.owner = job.owner, self.owner.id
        return await self._write(job, holder, seen_state)

    async def _write(self, job: Job, holder: str | None, seen_state: str | None = None, turn: bool = False) -> bool:
        """Save the job if ``holder`` still owns it (and it is still ``seen_state``, if given);
        False when it changed."""
        sql, args = self._update(job, holder, seen_state, turn)

        async def write() -> bool:
            async with self.db.transaction() as conn:
                cur = await conn.execute(sql, args)
                return cur.rowcount == 1
        # a restarting database server is waited for (at most a lease), so the job goes on
        return await self.owner.outlasting(write, f"job {job.id}")

    @staticmethod
    def _update(job: Job, holder: str | None, seen_state: str | None, turn: bool = False) -> tuple[str, builtins.list]:
        """The UPDATE that saves ``job`` only if ``holder`` owns it (and it is ``seen_state``);
        with ``turn``, it also takes the next turn."""
        sql = ("UPDATE jobs SET state=?, progress=?, message=?, result=?, error=?, started_at=?,"
               " finished_at=?, params=?, updated_at=?, owner=?"
               + (", turn=(SELECT coalesce(max(turn), 0) + 1 FROM jobs)" if turn else "")
               + " WHERE id=? AND owner IS NOT DISTINCT FROM ?")
        args = [job.state, job.progress, job.message, json.dumps(job.result) if job.result is not None else None,
                job.error, job.started_at, job.finished_at, json.dumps(job.params), utcnow(), job.owner,
                job.id, holder]
        if seen_state is not None:
            sql += " AND state = ?"
            args.append(seen_state)
        return sql, args

    async def _emit(self, event: JobEvent) -> None:
        for queue in self._watchers.get(event.job.id, []):
            queue.put_nowait(event)
        for listener in list(self._listeners):
            try:
                res = listener(event)
                if asyncio.iscoroutine(res):
                    await res
            except Exception:
                log.exception("job listener failed")
