"""How the engine talks to a run: start it, follow its events, ask it things, stop it.

The engine sees only ``Executor`` and ``RunHandle``. ``LocalExecutor`` spawns the child
(``python engine/sim/run/child/main.py <folder>``) with asyncio in a process group of its own and
speaks JSON lines over its stdin/stdout. An executor for several machines would host the same
child elsewhere (a named, detached actor) behind the same two classes; durability does not live
here but in the database (``service``), so a lost process is resumed from its checkpoint.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from engine.offload import run_cpu
from engine.sim.run.child_env import child_environment
from engine.sim.run.output import RUN_LOG
from engine.sim.run.protocol import SPEC_FILE, RunSpec, encode

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
# The child is started as a script, not with -m: runpy's frozen frames would sit at the bottom
# of every stack, and camel's ChatAgent.astep calls inspect.stack(), whose module lookup scans
# all of sys.modules for each such frame (about 0.5 s per agent step once torch is loaded).
CHILD_SCRIPT = Path(__file__).resolve().parent / "child" / "main.py"


class RunGone(Exception):
    """The run's process has ended; it cannot answer any more."""


class RunTimeout(Exception):
    """The run did not answer a request in time."""


class RunHandle(ABC):
    """One live run."""

    run_id: str
    pid: int | None

    @abstractmethod
    def events(self) -> AsyncIterator[dict[str, Any]]:
        """Every event from now until the process ends; the last one is ``{"type": "exit", ...}``."""

    @abstractmethod
    async def request(self, kind: str, timeout: float, **payload: Any) -> dict[str, Any]:
        """Send a request and await its reply (raises RunTimeout, RunGone, or RuntimeError
        with the child's error text when the reply is not ok)."""

    @abstractmethod
    async def stop(self, timeout: float) -> int | None:
        """Ask for a graceful stop at the end of the round; terminate the process group if it
        has not exited after ``timeout`` seconds. Returns the exit status."""

    @abstractmethod
    async def cancel(self) -> int | None:
        """End the run now (terminate, then kill, the process group)."""

    @abstractmethod
    async def wait(self) -> int | None:
        """Wait for the process to end; its exit status (negative: killed by that signal)."""

    @property
    @abstractmethod
    def alive(self) -> bool: ...


class Executor(ABC):
    @abstractmethod
    async def start(self, run_id: str, folder: Path, env: dict[str, str] | None = None) -> RunHandle:
        """Start the child for the simulation folder (its ``run_spec.json`` says what to do).
        The child sees only the environment it needs (``child_env``) plus ``env``."""

    @abstractmethod
    async def attach(self, run_id: str) -> RunHandle | None:
        """The live run with this id, or None when no process serves it any more."""

    async def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a short CPU-bound job (statistics, charts) where the executor runs work."""
        return await run_cpu(fn, *args)

    @abstractmethod
    async def close(self) -> None:
        """Cancel the runs this process started (the bot is shutting down; they resume from their
        checkpoints)."""


class LocalRun(RunHandle):
    def __init__(self, run_id: str, proc: asyncio.subprocess.Process, kill_grace: float = 5.0):
        self.run_id = run_id
        self.proc = proc
        self.pid = proc.pid
        self.kill_grace = kill_grace
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future] = {}
        self._subscribers: list[asyncio.Queue] = []
        self._history: list[dict] = []   # events so far, so a late follower misses nothing
        self._grew = asyncio.Event()     # set (and replaced) whenever an event is added
        self._ended = asyncio.Event()
        self.returncode: int | None = None
        self._reader = asyncio.create_task(self._read(), name=f"run-{run_id}-stdout")

    @property
    def alive(self) -> bool:
        return not self._ended.is_set()

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                try:
                    event = json.loads(line)
                except ValueError:
                    log.warning("run %s wrote a non-JSON line (%d bytes)", self.run_id, len(line))
                    log.debug("run %s's non-JSON line: %r", self.run_id, line[:200])   # may quote agents' posts
                    continue
                if event.get("type") == "reply":
                    future = self._pending.pop(str(event.get("id")), None)
                    if future is not None and not future.done():
                        future.set_result(event)
                    continue
                self._publish(event)
        finally:
            self.returncode = await self.proc.wait()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RunGone(f"run {self.run_id} ended (status {self.returncode})"))
            self._pending.clear()
            self._publish({"type": "exit", "returncode": self.returncode})
            self._ended.set()

    def _publish(self, event: dict) -> None:
        self._history.append(event)
        for queue in self._subscribers:
            queue.put_nowait(event)
        grew, self._grew = self._grew, asyncio.Event()
        grew.set()

    async def events_after(self, seen: int, wait_s: float) -> list[dict[str, Any]]:
        """The events after the first ``seen`` ones, waiting up to ``wait_s`` seconds for one:
        the long poll of a follower in another process (engine.sim.run.ray_executor)."""
        if len(self._history) <= seen:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._grew.wait(), wait_s)
        return self._history[seen:]

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        queue: asyncio.Queue = asyncio.Queue()
        for event in self._history:
            queue.put_nowait(event)
        self._subscribers.append(queue)
        try:
            while True:
                event = await queue.get()
                yield event
                if event["type"] == "exit":
                    return
        finally:
            self._subscribers.remove(queue)

    async def request(self, kind: str, timeout: float, **payload: Any) -> dict[str, Any]:
        if not self.alive or self.proc.stdin is None or self.proc.stdin.is_closing():
            raise RunGone(f"run {self.run_id} is not running")
        rid = f"{self.run_id}-{next(self._ids)}"
        future = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            self.proc.stdin.write(encode({"id": rid, "type": kind, **payload}))
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self._pending.pop(rid, None)
            raise RunGone(f"run {self.run_id} is not running") from None
        try:
            reply = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            self._pending.pop(rid, None)
            raise RunTimeout(f"run {self.run_id} did not answer {kind} within {timeout:.0f} s") from None
        if not reply.get("ok"):
            raise RuntimeError(reply.get("error") or f"{kind} failed")
        return reply

    async def wait(self) -> int | None:
        await self._ended.wait()
        return self.returncode

    def _signal_group(self, sig: int) -> None:
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)  # the child leads its own group (start_new_session)

    async def _terminate(self) -> int | None:
        self._signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._ended.wait(), self.kill_grace)
        except asyncio.TimeoutError:
            self._signal_group(signal.SIGKILL)
            await self._ended.wait()
        return self.returncode

    async def stop(self, timeout: float) -> int | None:
        if self.alive:
            with contextlib.suppress(RunGone, RunTimeout, RuntimeError):
                await self.request("stop", timeout=min(timeout, 10.0))
        try:
            await asyncio.wait_for(self._ended.wait(), timeout)
        except asyncio.TimeoutError:
            log.warning("run %s did not stop within %.0f s; terminating its process group", self.run_id, timeout)
            return await self._terminate()
        return self.returncode

    async def cancel(self) -> int | None:
        if not self.alive:
            return self.returncode
        return await self._terminate()


class LocalExecutor(Executor):
    """Children on this machine. A run survives only as long as this process: a child whose
    stdin closes (the bot died) stops at the end of its round, and is resumed from there."""

    def __init__(self, python: str = sys.executable, kill_grace: float = 5.0, die_with_parent: bool = False):
        self.python = python
        self.kill_grace = kill_grace
        # Where the parent is not the bot (a Ray actor), the child must not outlive it: a run
        # resumed elsewhere after the parent's node was lost would share the folder with it.
        self.die_with_parent = die_with_parent
        self._runs: dict[str, LocalRun] = {}

    async def start(self, run_id: str, folder: Path, env: dict[str, str] | None = None) -> RunHandle:
        current = self._runs.get(run_id)
        if current is not None and current.alive:
            raise RuntimeError(f"run {run_id} is already running (pid {current.pid})")
        folder = Path(folder).resolve()
        spec = RunSpec.from_json((folder / SPEC_FILE).read_text(encoding="utf-8"))
        child_env = child_environment(os.environ, spec.api_key_env, env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), child_env.get("PYTHONPATH", "")) if p)
        with open(folder / RUN_LOG, "ab") as stderr:
            proc = await asyncio.create_subprocess_exec(
                self.python, str(CHILD_SCRIPT), str(folder), cwd=str(folder), env=child_env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                start_new_session=True, limit=1 << 22,
                preexec_fn=_killed_with_parent if self.die_with_parent else None)
        run = LocalRun(run_id, proc, self.kill_grace)
        self._runs[run_id] = run
        return run

    async def attach(self, run_id: str) -> RunHandle | None:
        run = self._runs.get(run_id)
        return run if run is not None and run.alive else None

    async def close(self) -> None:
        """Cancel every live run (the bot is shutting down; runs resume from their checkpoints)."""
        await asyncio.gather(*(run.cancel() for run in self._runs.values() if run.alive))


def make_executor(settings) -> Executor:
    """The executor ``[simulation] executor`` names (``settings``: the SimulationSection).
    Ray is imported only when it is asked for."""
    if settings.executor == "ray":
        from engine.sim.run.ray_executor import RayExecutor
        return RayExecutor(settings.ray_address, settings.ray_namespace, settings.ray_num_cpus,
                           settings.ray_resources)
    return LocalExecutor()


def _killed_with_parent() -> None:
    """In the forked child, before exec: SIGKILL when the parent dies (Linux prctl)."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def child_pid_alive(pid: int | None, folder: Path) -> bool:
    """Is ``pid`` a run child for ``folder`` (left behind by an earlier bot process)?"""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(CHILD_SCRIPT).encode() in cmdline and str(Path(folder).resolve()).encode() in cmdline


async def end_stray_child(pid: int | None, folder: Path, grace: float = 5.0) -> bool:
    """Terminate a run child an earlier bot process left behind, so two never share a folder."""
    if pid is None or not child_pid_alive(pid, folder):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    for _ in range(int(grace * 10)):
        await asyncio.sleep(0.1)
        if not child_pid_alive(pid, folder):
            return True
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True
