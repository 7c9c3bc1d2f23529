"""Which process owns a job or a simulation run, and whether that process is still there.

Several processes may share one database: the bot, a console piped into ``python -m bot`` to
list ``/jobs``, ``python -m bot simulate`` in a terminal. Each of them, from its start, is one
*owner*: a row in ``owners`` with an id made of its host, pid and a random token, the start
time of that pid (so a pid the system later reuses is not mistaken for it) and a lease that a
heartbeat renews every third of ``lease_s``. Jobs and runs name the owner that runs them.

An owner is *gone* when its row is missing (released at a clean shutdown, or pruned after
expiry), when its lease expired, or, on the same host, when its pid is no longer alive or now
belongs to another process start. Only what a gone owner left behind is recovered; what a
live one runs is left alone, whoever asks. The lease covers what the pid cannot: another host,
or a process so stalled it stopped renewing (its work is then taken over, and its own writes
are fenced off by the owner column).

After each renewal the heartbeat runs the ``after_renew`` hooks: that is how a live process
notices, within a third of a lease, work that another process left when its lease expired
(engine.jobs takes such jobs over).
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable, TypeVar

from engine.db import Database
from engine.i18n import _

log = logging.getLogger(__name__)
T = TypeVar("T")


def process_start(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, from /proc); '' when there is no such
    process, it has already exited (a zombie) or the system does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()  # the command name in parentheses may hold spaces
    return "" if fields[0] in ("Z", "X") else fields[19]


def pid_is(pid: int, started: str) -> bool:
    """Is ``pid`` still the process that started at ``started``? Without a start time (no
    /proc), whether any process has that pid."""
    if started:
        return process_start(pid) == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Identity:
    """One process start: where it runs, its pid, and a token no other start shares."""
    host: str
    pid: int
    started: str
    token: str

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}:{self.token}"

    @classmethod
    def of_this_process(cls) -> "Identity":
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start(pid), secrets.token_hex(4))


class ProcessOwner:
    """This process as the owner of jobs and runs: its row in ``owners`` and the heartbeat
    that renews its lease. ``start`` and ``release`` may be called more than once."""

    def __init__(self, db: Database, lease_s: float = 30.0, identity: Identity | None = None):
        self.db = db
        self.lease_s = lease_s
        self.identity = identity or Identity.of_this_process()
        self.after_renew: list[Callable[[], Awaitable[object]]] = []  # run by the heartbeat after each renewal
        self._heartbeat: asyncio.Task | None = None

    @property
    def id(self) -> str:
        return self.identity.id

    async def start(self) -> None:
        """Register this process (pruning rows whose lease ran out) and start renewing."""
        if self._heartbeat is not None:
            return
        await self.db.execute("DELETE FROM owners WHERE lease_until < ?", (time.time(),))
        await self.renew()
        self._heartbeat = asyncio.create_task(self._beat(), name=f"owner-{self.identity.token}")

    async def renew(self) -> None:
        ident = self.identity
        # An upsert: a row pruned while this process was stalled comes back.
        await self.db.execute(
            "INSERT INTO owners(id, host, pid, pid_started, lease_until, started_at) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT(id) DO UPDATE SET lease_until=excluded.lease_until",
            (ident.id, ident.host, ident.pid, ident.started, time.time() + self.lease_s,
             time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))

    async def outlasting(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """A write of work this process runs (a job's progress and state, a run's rounds):
        ``call()``, waiting for a database that cannot be reached (``Database.outlasting``) at most
        one lease. A restarting server is ridden out; past a lease, other processes may take this
        one's work over, so the last unreachable error is raised and the work ends interrupted."""
        return await self.db.outlasting(call, what, within=self.lease_s)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self.renew()
            except Exception as err:  # a busy database: the next beat tries again within the lease
                log.warning("could not renew this process's lease: %s: %s", type(err).__name__, err)
                continue
            for hook in list(self.after_renew):
                try:
                    await hook()
                except Exception:
                    log.exception("a heartbeat hook failed")

    async def release(self) -> None:
        """Stop renewing and remove the row: what this process ran is no longer held."""
        if self._heartbeat is None:
            return
        self._heartbeat.cancel()
        await asyncio.gather(self._heartbeat, return_exceptions=True)
        self._heartbeat = None
        await self.db.execute("DELETE FROM owners WHERE id = ?", (self.id,))

    async def gone(self, owner_id: str | None) -> bool:
        """Has the owner ``owner_id`` ended? (None: work recorded before owners existed.)"""
        if owner_id == self.id:
            return False
        if owner_id is None:
            return True
        row = await self.db.fetchone(
            "SELECT host, pid, pid_started, lease_until FROM owners WHERE id = ?", (owner_id,))
        return self.ended(row)

    def ended(self, row, lease_only: bool = False) -> bool:
        """Has the owner whose ``owners`` row (host, pid, pid_started, lease_until) is ``row``
        ended? None: it has no row. ``lease_only``: only an expired lease counts, not a pid
        that ended on this host."""
        if row is None or row["lease_until"] < time.time():
            return True
        if not lease_only and row["host"] == self.identity.host:
            return not pid_is(row["pid"], row["pid_started"])
        return False

    async def describe(self, owner_id: str | None) -> str:
        """'another bot process (pid 123 on host h)', for messages that refuse to touch its work."""
        row = await self.db.fetchone("SELECT host, pid FROM owners WHERE id = ?", (owner_id,))
        if row is None:
            return _("another bot process")
        return _("another bot process (pid {pid} on {host})", pid=row["pid"], host=row["host"])
