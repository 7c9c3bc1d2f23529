"""Background jobs: persisted, observable, cancellable, bounded, and honest after a restart.

A job kind is registered with an async handler ``handler(ctx: JobContext) -> dict | None``.
Every state change and progress report is written to the ``jobs`` table and fanned out to
subscribers (the chat adapters). States go queued -> running -> done, failed, cancelled,
interrupted or stopped (a handler that ends early because someone asked raises JobStopped);
every state but done can be resumed.

Several processes may share the database (engine.owners): each job names the process that
runs it. At start-up only jobs whose owner is gone are marked 'interrupted' (and can be
resumed with ``resume``); a job another live process runs is left alone and cannot be resumed
or cancelled from here. Every write of a running job is conditional on its owner, so a process
whose work was taken over (it stalled past its lease) stops that job instead of overwriting.
"""
from __future__ import annotations

import asyncio
import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Awaitable, Callable

from engine.db import Database
from engine.owners import ProcessOwner

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED, INTERRUPTED, STOPPED = (
    "queued", "running", "done", "failed", "cancelled", "interrupted", "stopped")
FINAL_STATES = {DONE, FAILED, CANCELLED, INTERRUPTED, STOPPED}


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class JobError(Exception):
    """A job failed for a reason worth showing to the user as is. ``resumable = False`` marks a
    failure that resuming would only repeat (a bad document): no resume is suggested for it."""

    resumable = True


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

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES

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
            owner=row["owner"],
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
    def __init__(self, db: Database, max_concurrent: int = 2, owner: ProcessOwner | None = None):
        self.db = db
        # Without an owner given, the runner is a process owner of its own, released at shutdown.
        self.owner = owner or ProcessOwner(db)
        self._owns_owner = owner is None
        self._taken: set[str] = set()  # jobs another process took over while this one ran them
        self._handlers: dict[str, Handler] = {}
        self._tasks: dict[str, asyncio.Task] = {}
        self._listeners: list[Listener] = []
        self._watchers: dict[str, list[asyncio.Queue]] = {}
        self._slots = asyncio.Semaphore(max_concurrent)
        self._closing = False

    def register(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every event of every job; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def recover(self) -> list[Job]:
        """At start-up: jobs left 'running' or 'queued' by a process that is gone become
        'interrupted' (and this process their owner); those of live processes are left alone."""
        await self.owner.start()
        rows = await self.db.fetchall("SELECT * FROM jobs WHERE state IN (?, ?)", (RUNNING, QUEUED))
        gone: dict[str | None, bool] = {}
        jobs = []
        for row in rows:
            job = Job.from_row(row)
            if job.owner not in gone:
                gone[job.owner] = await self.owner.gone(job.owner)
            if not gone[job.owner]:
                continue
            seen, job.state, job.finished_at = job.state, INTERRUPTED, utcnow()
            job.message = "interrupted by a restart"
            if await self._take_over(job, seen):  # another process starting now may have been first
                jobs.append(job)
                log.warning("job %s (%s) was interrupted by a restart", job.id, job.kind)
        return jobs

    async def submit(self, kind: str, params: dict[str, Any], scope: str,
                     channel: str | None = None, title: str = "", started_by: str = "") -> Job:
        """Queue a job; ``started_by`` is the author id of the person asking for it."""
        if kind not in self._handlers:
            raise ValueError(f"unknown job kind: {kind}")
        await self.owner.start()
        now = utcnow()
        job = Job(id=secrets.token_hex(4), kind=kind, scope=scope, channel=channel,
                  title=title or kind, params=dict(params), state=QUEUED, created_at=now, started_by=started_by,
                  owner=self.owner.id)
        await self.db.execute(
            "INSERT INTO jobs(id, kind, scope, channel, title, params, state, message, created_at, updated_at,"
            " started_by, owner) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (job.id, kind, scope, channel, job.title, json.dumps(job.params), QUEUED, "", now, now, started_by,
             job.owner),
        )
        self._start(job)
        return job

    async def resume(self, job_id: str) -> Job:
        """Run an interrupted or failed job again with its saved parameters and checkpoints."""
        job = await self.get(job_id)
        if job is None:
            raise JobError(f"no job {job_id}")
        if job.state in (RUNNING, QUEUED):
            if job.id in self._tasks or job.owner == self.owner.id:
                raise JobError(f"job {job_id} is already {job.state}")
            if (where := await self.elsewhere(job)) is not None:
                raise JobError(f"job {job_id} is {job.state} in {where}; "
                               f"it cannot be resumed while that process runs it")
            # its process is gone and no restart has recovered it yet: take it over now
        elif job.state not in (INTERRUPTED, FAILED, CANCELLED, STOPPED):
            raise JobError(f"job {job_id} is {job.state}; only interrupted, failed, stopped or cancelled "
                           f"jobs resume")
        await self.owner.start()
        seen, job.state, job.error, job.finished_at, job.message = job.state, QUEUED, None, None, "resuming"
        job.result = None
        if not await self._take_over(job, seen):
            raise JobError(f"job {job_id} was resumed by another bot process just now")
        self._start(job)
        return job

    def _start(self, job: Job) -> None:
        self._tasks[job.id] = asyncio.create_task(self._run(job), name=f"job-{job.id}")

    async def _run(self, job: Job) -> None:
        ctx = JobContext(self, job)
        try:
            await self._emit(JobEvent(job, "state"))
            async with self._slots:
                job.state, job.started_at = RUNNING, utcnow()
                await self._save(job)
                await self._emit(JobEvent(job, "state"))
                result = await self._handlers[job.kind](ctx)
            job.state, job.result, job.progress = DONE, result or {}, 1.0
        except asyncio.CancelledError:
            if job.id in self._taken:
                job.state, job.message = INTERRUPTED, "taken over by another bot process"
            elif self._closing:
                job.state, job.message = INTERRUPTED, "interrupted by shutdown"
            else:
                job.state, job.message = CANCELLED, "cancelled"
        except JobStopped as err:
            job.state, job.message = STOPPED, str(err)
        except JobError as err:
            job.state, job.error = FAILED, str(err)
            if not err.resumable:
                job.result = {"resumable": False}
        except Exception as err:  # a bug or an unexpected failure: keep the job record honest
            log.exception("job %s (%s) failed", job.id, job.kind)
            job.state, job.error = FAILED, f"{type(err).__name__}: {err}"
        finally:
            job.finished_at = utcnow()
            self._tasks.pop(job.id, None)
            await asyncio.shield(self._finish(job))
            self._taken.discard(job.id)

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
                raise JobError(f"job {job_id} runs in {where}; cancel it there")
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
        sql, args = "SELECT * FROM jobs WHERE 1=1", []
        if scope is not None:
            sql += " AND scope = ?"; args.append(scope)
        if kind is not None:
            sql += " AND kind = ?"; args.append(kind)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"; args.append(limit)
        return [Job.from_row(r) for r in await self.db.fetchall(sql, args)]

    async def changed_since(self, scope: str, kind: str, since: str) -> list[Job]:
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
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._owns_owner:
            await self.owner.release()

    async def _save(self, job: Job) -> None:
        if await self._write(job, job.owner) or job.id not in self._tasks or job.id in self._taken:
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

    async def _write(self, job: Job, holder: str | None, seen_state: str | None = None) -> bool:
        """Save the job if ``holder`` still owns it (and it is still ``seen_state``, if given);
        False when it changed."""
        sql = ("UPDATE jobs SET state=?, progress=?, message=?, result=?, error=?, started_at=?,"
               " finished_at=?, params=?, updated_at=?, owner=? WHERE id=? AND owner IS NOT DISTINCT FROM ?")
        args = [job.state, job.progress, job.message, json.dumps(job.result) if job.result is not None else None,
                job.error, job.started_at, job.finished_at, json.dumps(job.params), utcnow(), job.owner,
                job.id, holder]
        if seen_state is not None:
            sql += " AND state = ?"
            args.append(seen_state)
        async with self.db.transaction() as conn:
            cur = await conn.execute(sql, args)
            return cur.rowcount == 1

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
