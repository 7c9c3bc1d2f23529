"""Files the bot keeps only for a while: attachments it downloaded and files it wrote to upload.

``<data_dir>/downloads/<platform>/<channel>/`` holds attachments, needed while their command
runs, while a job that names them in its parameters may still run or be resumed, and while a
/simulate waits for /confirm (``hold``); a simulation copies its documents into its own folder.
``<data_dir>/outgoing/<platform>/`` holds files written to be uploaded (long answers), needed
until the upload. ``FileRetention`` deletes them:

- after use: ``discard`` when the command has run, the upload is done, or a job that named
  them is done; a file another unfinished job names, or a held one, stays;
- by age: ``sweep`` at start and then daily deletes what is older than
  ``[bot] file_retention_hours`` (what a crash, a failed upload or an unconfirmed /simulate left
  behind), except files a queued or running job names and held ones.

Nothing outside these two folders is ever deleted: simulation folders (``<data_dir>/sims``),
documents a console user named by path and the database are out of reach.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Iterable

from engine.db import Database
from engine.jobs import DONE, QUEUED, RUNNING, JobEvent, params_in
from engine.offload import run_cpu

log = logging.getLogger(__name__)

DOWNLOADS = "downloads"
OUTGOING = "outgoing"
SWEEP_EVERY_S = 24 * 3600.0


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def remove_old_files(roots: list[Path], older_than: float, keep: set[Path]) -> int:
    """Delete files under ``roots`` last modified before ``older_than`` (a POSIX time), except
    ``keep``, then the folders left empty (the roots stay). Returns how many files went."""
    removed = 0
    for root in roots:
        if not root.is_dir():
            continue
        for folder, _dirs, files in os.walk(root, topdown=False):
            here = Path(folder)
            for name in files:
                path = here / name
                try:
                    if path.is_symlink() or path in keep or path.stat().st_mtime >= older_than:
                        continue
                    path.unlink()
                    removed += 1
                except FileNotFoundError:
                    continue
            if here != root:
                with contextlib.suppress(OSError):  # not empty: it stays
                    here.rmdir()
    return removed


class FileRetention:
    def __init__(self, data_dir: Path, retention_hours: float, db: Database):
        self.roots = [(Path(data_dir) / DOWNLOADS).resolve(), (Path(data_dir) / OUTGOING).resolve()]
        self.retention_s = retention_hours * 3600.0
        self.db = db
        self._held: dict[Path, float] = {}  # path -> monotonic time until which it stays
        self._sweeper: asyncio.Task | None = None

    def _managed(self, path: Path) -> Path | None:
        """``path`` resolved, when it lies in one of the two folders; else None."""
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError):
            return None
        return resolved if any(resolved.is_relative_to(root) and resolved != root for root in self.roots) else None

    def hold(self, paths: Iterable[Path], seconds: float) -> None:
        """Keep these files from any deletion for ``seconds``."""
        until = time.monotonic() + seconds
        for path in paths:
            managed = self._managed(path)
            if managed is not None:
                self._held[managed] = max(until, self._held.get(managed, 0.0))

    def _still_held(self) -> set[Path]:
        now = time.monotonic()
        self._held = {p: until for p, until in self._held.items() if until > now}
        return set(self._held)

    async def _named_by_jobs(self, states: tuple[str, ...] | None) -> set[Path]:
        """Files in the two folders named in the parameters of jobs in ``states`` (None: every
        job not done, which includes the failed and interrupted ones that may be resumed)."""
        named = set()
        for stored in await params_in(self.db, states):
            try:
                params = json.loads(stored or "{}")
            except ValueError:
                continue
            for text in _strings(params):
                if "/" in text and (managed := self._managed(Path(text))) is not None:
                    named.add(managed)
        return named

    async def discard(self, paths: Iterable[Path | None]) -> int:
        """Delete these files now that their use is over, unless held or named by a job that is
        not done. Paths outside the two folders are ignored. Returns how many went."""
        candidates = {m for p in paths if p is not None and (m := self._managed(p)) is not None}
        if not candidates:
            return 0
        keep = self._still_held() | await self._named_by_jobs(None)
        removed = 0
        for path in candidates - keep:
            try:
                path.unlink()
                removed += 1
            except (FileNotFoundError, IsADirectoryError):
                continue
        return removed

    async def sweep(self, now: float | None = None) -> int:
        """Delete files older than the retention period (see the module's contract)."""
        older_than = (time.time() if now is None else now) - self.retention_s
        keep = self._still_held() | await self._named_by_jobs((QUEUED, RUNNING))
        removed = await run_cpu(remove_old_files, self.roots, older_than, keep)
        if removed:
            log.info("removed %d downloaded or outgoing file(s) older than %.0f h", removed,
                     self.retention_s / 3600)
        return removed

    async def on_job_event(self, event: JobEvent) -> None:
        """A job listener: the files a job named are discarded once it is done."""
        if event.kind == "state" and event.job.state == DONE:
            await self.discard(Path(s) for s in _strings(event.job.params) if "/" in s)

    async def start(self) -> None:
        """Sweep now, then every day while the bot runs."""
        await self.sweep()
        self._sweeper = asyncio.create_task(self._sweep_daily(), name="file-retention")

    async def _sweep_daily(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:
                await self.sweep()
            except Exception:
                log.exception("file retention sweep failed")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
