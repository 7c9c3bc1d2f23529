"""The Ray executor's cost against the local one: wall time of a run, an interview's round trip,
and the memory a Ray node spends per running simulation.

    python bench/ray_executor.py [--agents 10] [--rounds 6] [--reps 5] [--interviews 5] [--delay 0.05]

One process, one fake OpenAI-compatible server (tests/fakes/openai_server.py, valid tool calls
after ``--delay`` seconds), one bot database. The script starts a local Ray instance (``ray.init``,
one node, no dashboard) before anything is timed: the head's start is not counted, the start of
each run's actor is. Then, ``--reps`` times and alternating which goes first, the same simulation
(every agent active once a round on both platforms) runs through the run service (``SimRuns``)
with the ``LocalExecutor`` and with the ``RayExecutor``:

- wall time: ``SimRuns.run`` from the call until its last round has ended (for Ray: actor start,
  child start, every round, events streamed back by the long poll); "started": until the
  executor has started the child (its pid recorded; polled every 0.1 s); "to round 1": until
  the child's first ``round_start`` (its actions log).
- interview: ``--interviews`` calls of ``SimRuns.interview`` (the bot's path) of one agent on one
  platform while the finished run idles, one LLM answer each.
- memory: peak RSS, sampled every 0.5 s during the run with psutil, of the run's child (the
  OASIS process) and, for Ray, of the ``RunHost`` actor's worker process (the child's parent);
  and the kernel's peak (VmHWM) of both, read while the run idles.

Ray starts its workers at a niceness raised by 15 (``RAY_worker_niceness``, read when the node
starts), and the run's child inherits it: on a machine shared with other work the child then
gets less CPU than a local one. Each run line shows the child's niceness; run with
``RAY_worker_niceness=0`` in the environment to compare at equal priority.

Prints each run, then medians and the targets (Ray wall <= 1.10x local, interview
<= local + 100 ms).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
import ray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.db import open_database  # noqa: E402
from engine.sim.run.executor import LocalExecutor  # noqa: E402
from engine.sim.run.output import ACTIONS_LOG, PLATFORMS  # noqa: E402
from engine.sim.run.ray_executor import RayExecutor  # noqa: E402
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, SocialResponder  # noqa: E402
from tests.helpers.sim import make_sim_folder  # noqa: E402

NAMESPACE = "bench"
MIB = 2 ** 20
FIGURES = ("wall_s", "started_s", "to_round1_s", "interview_ms", "child_mib", "worker_mib", "child_hwm_mib",
           "worker_hwm_mib")


def tree_rss(proc: psutil.Process) -> int:
    """RSS of a process and its descendants (0 once it has gone)."""
    total = 0
    try:
        for p in [proc, *proc.children(recursive=True)]:
            total += p.memory_info().rss
    except psutil.NoSuchProcess:
        pass
    return total


async def sample_memory(runs: SimRuns, sim_id: str, peak: dict[str, float], t0: float) -> None:
    """Peak RSS of the run's child tree and of its parent when that is a Ray worker, until
    cancelled; ``peak["started_s"]``: when the run's child was first seen (its pid recorded)."""
    child = worker = None
    while True:
        if child is None:
            state = await runs.get(sim_id)
            if state is not None and state.pid:
                peak["started_s"] = time.perf_counter() - t0
                child = psutil.Process(state.pid)
                peak["nice"] = child.nice()
                parent = child.parent()
                worker = parent if parent is not None and parent.pid != psutil.Process().pid else None
        if child is not None:
            peak["child"] = max(peak.get("child", 0), tree_rss(child))
            if worker is not None:
                try:
                    peak["worker"] = max(peak.get("worker", 0), worker.memory_info().rss)
                except psutil.NoSuchProcess:
                    pass
        await asyncio.sleep(0.5 if child is not None else 0.1)


def high_water_mib(pid: int) -> float:
    """The kernel's peak RSS of a live process (VmHWM), which sampling can miss."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024


def first_round_ts(folder: Path) -> float:
    starts = []
    for platform in PLATFORMS:
        for line in (folder / platform / ACTIONS_LOG).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event["type"] == "round_start":
                starts.append(event["ts"])
                break
    return min(starts)


async def one_run(variant: str, executor, db, server: FakeOpenAI, folder: Path, agents: int, rounds: int,
                  interviews: int) -> dict:
    sim_id = folder.name
    make_sim_folder(folder, agents=agents, rounds=rounds, sim_id=sim_id, everyone_everywhere=True)
    runs = SimRuns(db, executor, LLMTarget(server.base_url, "fake-model"),
                   RunSettings(idle_s=120.0, progress_interval_s=2.0))

    async def progress(fraction, message, **data) -> None:
        pass

    peak: dict[str, float] = {}
    t0_epoch, t0 = time.time(), time.perf_counter()
    sampler = asyncio.create_task(sample_memory(runs, sim_id, peak, t0))
    await runs.run(sim_id, folder, progress)
    wall = time.perf_counter() - t0
    sampler.cancel()
    state = await runs.get(sim_id)
    assert state is not None and state.pid is not None  # it has just run
    child = psutil.Process(state.pid)   # idling now, still alive
    hwm = {"child_hwm_mib": high_water_mib(child.pid),
           "worker_hwm_mib": high_water_mib(child.ppid()) if variant == "ray" else 0.0}
    asked = []
    for i in range(interviews):
        t = time.perf_counter()
        answers = await runs.interview(sim_id, [1], f"Question {i}: will you pay the toll?", platforms=["twitter"],
                                       asked_by="bench")
        asked.append(time.perf_counter() - t)
        assert len(answers) == 1 and answers[0].answer, answers
    await runs.release(sim_id)
    await runs.close()
    return {"variant": variant, "wall_s": wall, "started_s": peak["started_s"],
            "to_round1_s": first_round_ts(folder) - t0_epoch, "nice": peak["nice"],
            "interview_ms": statistics.median(asked) * 1000, "child_mib": peak.get("child", 0) / MIB,
            "worker_mib": peak.get("worker", 0) / MIB, **hwm}


def show(r: dict) -> None:
    worker = (f"  actor worker {r['worker_mib']:4.0f} MiB (peak {r['worker_hwm_mib']:4.0f})"
              if r["variant"] == "ray" else "")
    print(f"  {r['variant']:5} wall {r['wall_s']:6.2f} s  started {r['started_s']:4.2f} s  "
          f"to round 1 {r['to_round1_s']:5.2f} s  "
          f"interview {r['interview_ms']:6.1f} ms  child {r['child_mib']:4.0f} MiB (peak {r['child_hwm_mib']:4.0f})"
          f"{worker}" + (f"  child niceness {r['nice']}" if "nice" in r else ""), flush=True)


def ray_own_rss() -> float:
    """RSS of the processes the local Ray instance runs besides any actor (GCS, raylet, idle workers)."""
    return sum(tree_rss(p) for p in psutil.Process().children()) / MIB


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--interviews", type=int, default=5, help="interviews per run (median per run)")
    ap.add_argument("--delay", type=float, default=0.05, help="seconds the fake LLM takes per answer")
    args = ap.parse_args()
    t = time.perf_counter()
    ray.init(num_cpus=2, namespace=NAMESPACE, include_dashboard=False, object_store_memory=256 * MIB,
             logging_level=logging.WARNING, log_to_driver=False)
    print(f"Ray head started in {time.perf_counter() - t:.1f} s (not counted); its own processes "
          f"{ray_own_rss():.0f} MiB RSS", flush=True)
    executors = {"local": LocalExecutor(), "ray": RayExecutor(namespace=NAMESPACE, num_cpus=1)}
    results: list[dict] = []
    with FakeOpenAI(SocialResponder(delay=args.delay)) as server, tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "bot.sqlite3")
        print(f"{args.agents} agents x {args.rounds} rounds x 2 platforms, fake LLM delay {args.delay} s, "
              f"{args.reps} reps alternating, {args.interviews} interviews per run", flush=True)
        for rep in range(args.reps):
            order = ("local", "ray") if rep % 2 == 0 else ("ray", "local")
            for variant in order:
                r = await one_run(variant, executors[variant], db, server, Path(tmp) / f"{variant}{rep}",
                                  args.agents, args.rounds, args.interviews)
                results.append(r)
                show(r)
        await db.close()
    print(f"Ray's own processes after the runs: {ray_own_rss():.0f} MiB RSS")
    ray.shutdown()
    med = {v: {k: statistics.median(r[k] for r in results if r["variant"] == v)
               for k in FIGURES}
           for v in ("local", "ray")}
    print(f"medians over {args.reps}:")
    for v in ("local", "ray"):
        show({"variant": v, **med[v]})
    loc, ry = med["local"], med["ray"]
    print(f"wall ray/local {ry['wall_s'] / loc['wall_s']:.3f} (target <= 1.10); "
          f"interview ray - local {ry['interview_ms'] - loc['interview_ms']:+.1f} ms (target <= +100 ms); "
          f"memory per run (sampled max; kernel peak): local {loc['child_mib']:.0f}; {loc['child_hwm_mib']:.0f} MiB, "
          f"ray {ry['child_mib'] + ry['worker_mib']:.0f}; {ry['child_hwm_mib'] + ry['worker_hwm_mib']:.0f} MiB "
          f"(child + actor worker)")


if __name__ == "__main__":
    asyncio.run(main())
