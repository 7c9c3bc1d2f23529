"""Simulation runs on a Ray cluster (``[simulation] executor = "ray"``); the only module that imports Ray.

Each run is a detached, named actor (``run-<sim id>`` in the namespace ``[simulation]
ray_namespace``) placed by Ray on a node with the CPUs and the custom resources the config
asks for (``ray_num_cpus``, ``ray_resources``). The actor hosts the very child process the local
executor starts (a ``LocalExecutor`` runs inside it), so the JSON-lines protocol, checkpoints
and usage logs are the same. The simulation folder must be a path every node reads and writes
(``[bot] data_dir`` on shared storage): the child writes its checkpoints there, and a run
resumed on another node reads them.

The bot process follows a run with a long poll (``events_after``: every event after the ones it
has seen), so any bot process can follow any run by name; requests (interview, stop, inject)
are actor calls. When the actor cannot be reached any more (its node died, or it was killed),
``events`` ends with ``{"type": "exit", "returncode": None, "lost": "<why>"}``; the run service
resumes such a run from its last checkpoint (engine.sim.run.service). The child is started with
a parent-death signal, so it never outlives its actor and never writes into a folder a resumed
run uses.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import ray
from ray.exceptions import RayActorError

from engine.datadir import private_files
from engine.sim.run.executor import Executor, LocalExecutor, RunGone, RunHandle, RunTimeout

log = logging.getLogger(__name__)

POLL_S = 5.0        # how long one long poll for events waits on the actor
GONE_CHECKS = 3     # "temporarily unavailable" answers in a row before the actor counts as lost


class RunHost:
    """The actor: one run's child process on the node Ray chose for it."""

    def __init__(self, run_id: str, folder: str, env: dict[str, str] | None, python: str):
        private_files()   # this worker writes the run's log into the shared folder: the user's only
        self.run_id, self.folder, self.env = run_id, Path(folder), env
        self.executor = LocalExecutor(python=python, die_with_parent=True)
        self.run: Any = None

    async def start(self) -> dict[str, Any]:
        self.run = await self.executor.start(self.run_id, self.folder, self.env)
        return {"pid": self.run.pid, "node": ray.get_runtime_context().get_node_id()}

    async def events_after(self, seen: int, wait_s: float) -> list[dict[str, Any]]:
        return await self.run.events_after(seen, wait_s)

    async def request(self, kind: str, timeout: float, payload: dict[str, Any]) -> dict[str, Any]:
        """The child's reply, or {"failure": "gone" | "timeout" | "error", "message": ...}: the
        failure is said in data, so the caller raises the same exceptions the local run does."""
        try:
            return await self.run.request(kind, timeout, **payload)
        except RunGone as err:
            return {"failure": "gone", "message": str(err)}
        except RunTimeout as err:
            return {"failure": "timeout", "message": str(err)}
        except RuntimeError as err:
            return {"failure": "error", "message": str(err)}

    async def stop(self, timeout: float) -> int | None:
        return await self.run.stop(timeout)

    async def cancel(self) -> int | None:
        return await self.run.cancel()

    async def wait(self) -> int | None:
        return await self.run.wait()

    async def alive(self) -> bool:
        return self.run is not None and self.run.alive


class RayRun(RunHandle):
    """A run hosted by a ``RunHost`` actor, as the bot process sees it."""

    def __init__(self, run_id: str, actor: Any, pid: int | None, node: str = ""):
        self.run_id, self.actor, self.pid, self.node = run_id, actor, pid, node
        self.returncode: int | None = None
        self._ended = asyncio.Event()

    @property
    def alive(self) -> bool:
        return not self._ended.is_set()

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        seen, unavailable = 0, 0
        while True:
            try:
                batch = await self.actor.events_after.remote(seen, POLL_S)
                unavailable = 0
            except RayActorError as err:
                unavailable += 1   # "temporarily unavailable" comes first when a node dies
                if unavailable < GONE_CHECKS and not _died(err):
                    await asyncio.sleep(1.0)
                    continue
                self._ended.set()
                yield {"type": "exit", "returncode": None, "lost": _why_lost(err)}
                return
            for event in batch:
                seen += 1
                if event["type"] == "exit":
                    self.returncode = event["returncode"]
                    self._ended.set()
                    _release(self.actor)
                yield event
                if event["type"] == "exit":
                    return

    async def request(self, kind: str, timeout: float, **payload: Any) -> dict[str, Any]:
        if not self.alive:
            raise RunGone(f"run {self.run_id} is not running")
        try:
            reply = await asyncio.wait_for(self.actor.request.remote(kind, timeout, payload), timeout + 10.0)
        except (RayActorError, asyncio.TimeoutError) as err:
            raise RunGone(f"run {self.run_id} cannot be reached: {_why_lost(err)}") from None
        failure = reply.get("failure")
        if failure == "gone":
            raise RunGone(reply["message"])
        if failure == "timeout":
            raise RunTimeout(reply["message"])
        if failure == "error":
            raise RuntimeError(reply["message"])
        return reply

    async def _call(self, method: str, *args: Any) -> int | None:
        try:
            code = await getattr(self.actor, method).remote(*args)
        except RayActorError:
            code = None
        self.returncode = code
        self._ended.set()
        _release(self.actor)
        return code

    async def stop(self, timeout: float) -> int | None:
        return await self._call("stop", timeout)

    async def cancel(self) -> int | None:
        return await self._call("cancel")

    async def wait(self) -> int | None:
        return await self._call("wait")


class RayExecutor(Executor):
    """Runs as detached actors on the cluster at ``address`` ('' starts a Ray instance in this
    process's machine; 'auto' joins the one running here)."""

    def __init__(self, address: str = "", namespace: str = "worldbot", num_cpus: float = 1.0,
                 resources: dict[str, float] | None = None, python: str = sys.executable):
        self.address, self.namespace = address, namespace
        self.num_cpus, self.resources, self.python = num_cpus, dict(resources or {}), python
        self._started: dict[str, RayRun] = {}
        self._host: Any = None
        self._connecting = asyncio.Lock()

    async def _connect(self) -> None:
        # one at a time: an ensemble's runs start together, and a second ray.init while the first
        # is under way (in its thread) fails that run ("Perhaps you called ray.init twice")
        async with self._connecting:
            if not ray.is_initialized():
                await asyncio.to_thread(ray.init, address=self.address or None, namespace=self.namespace,
                                        logging_level=logging.WARNING, log_to_driver=False)
            if self._host is None:
                self._host = ray.remote(RunHost)

    def _name(self, run_id: str) -> str:
        return f"run-{run_id}"

    async def start(self, run_id: str, folder: Path, env: dict[str, str] | None = None) -> RunHandle:
        await self._connect()
        if await self.attach(run_id) is not None:
            raise RuntimeError(f"run {run_id} is already running on the Ray cluster")
        _release(self._named(run_id))  # a finished run's actor, if one is left
        actor = self._host.options(name=self._name(run_id), namespace=self.namespace, lifetime="detached",
                                   num_cpus=self.num_cpus, resources=self.resources or None,
                                   max_restarts=0).remote(run_id, str(Path(folder).resolve()), env, self.python)
        info = await actor.start.remote()
        run = RayRun(run_id, actor, info["pid"], info["node"])
        self._started[run_id] = run
        log.info("simulation run %s started on Ray node %s", run_id, info["node"][:12])
        return run

    def _named(self, run_id: str) -> Any:
        try:
            return ray.get_actor(self._name(run_id), namespace=self.namespace)
        except ValueError:
            return None

    async def attach(self, run_id: str) -> RunHandle | None:
        """The live run of this id, started by this process or any other one."""
        run = self._started.get(run_id)
        if run is not None and run.alive:
            return run
        await self._connect()
        actor = self._named(run_id)
        if actor is None:
            return None
        try:
            if not await actor.alive.remote():
                return None
        except RayActorError:
            return None
        return RayRun(run_id, actor, None)

    async def submit(self, fn, *args: Any) -> Any:
        """A short CPU-bound job (statistics, charts) as a Ray task."""
        await self._connect()
        return await ray.remote(fn).remote(*args)

    async def close(self) -> None:
        """Cancel the runs this process started (as the local executor does: they resume from
        their checkpoints when the bot is back)."""
        await asyncio.gather(*(run.cancel() for run in self._started.values() if run.alive),
                             return_exceptions=True)


def _release(actor: Any) -> None:
    """End a run's actor once its child has exited (detached actors live until killed)."""
    if actor is not None:
        try:
            ray.kill(actor, no_restart=True)
        except (RayActorError, ValueError):
            pass


def _died(err: BaseException) -> bool:
    return type(err).__name__ == "ActorDiedError"


def _why_lost(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return f"the Ray actor hosting it was lost ({text[:160]})"
