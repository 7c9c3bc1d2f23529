"""Step 4 against a bare camel-oasis script: same agents, rounds and fake LLM, in one run.

    python bench/bench_run.py [--agents 30] [--rounds 6] [--reps 2] [--delay 0.0] [--bare-rounds N]

Both variants run both platforms in one process against one fake OpenAI-compatible server
(tests/fakes/openai_server.py, answering with valid tool calls). Ours is the whole step: the
run service in this process (database, progress, checkpoints) and the child it starts. Prints
per variant: wall time of the rounds, set-up time (process start to the first round), the time of
a round (mean over both platforms, which run concurrently: first, last and mean round), LLM requests
per active agent-step (counted by the fake as it answers: it keeps no request bodies, which at 1,000
agents would hold gigabytes) and the simulating process's peak RSS; then the ratios (ours / bare,
medians over the reps).

``--together`` runs the two variants of a rep at the same time rather than one after the other: on
a shared machine under heavy load both then see the same load, and together they get twice the
share of the CPUs (the request counts are told apart by model name; dropped requests are counted
for both at once). ``--bare-rounds`` runs bare oasis for fewer rounds than ours (at 1,000 agents its
rounds grow with every comment its feeds show, so ten of them take hours here); the round ratio
then compares the rounds both ran, and the wall ratio is left out.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BARE_MODEL, OUR_MODEL = "fake-model", "fake-model-ours"   # bare_oasis.py asks for BARE_MODEL
sys.path.insert(0, str(ROOT))

from engine.db import open_database  # noqa: E402
from engine.sim.run.executor import LocalExecutor  # noqa: E402
from engine.sim.run.output import ACTIONS_LOG  # noqa: E402
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, SocialResponder  # noqa: E402
from tests.helpers.sim import make_sim_folder  # noqa: E402


class CountByModel:
    """Counts the agent requests (those offering tools) per model name, for whatever ``inner`` answers."""

    def __init__(self, inner):
        self.inner = inner
        self.counts: Counter = Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict):
        if body.get("tools"):
            with self._lock:
                self.counts[body.get("model")] += 1
        return self.inner(body)


def counted(server: FakeOpenAI) -> Counter:
    """The agent requests the fake has answered so far, per model."""
    assert isinstance(server.responder, CountByModel)
    return server.responder.counts


def per_round(round_s: dict[str, list[float]]) -> list[float]:
    """Each round's time, the mean over the platforms (they run concurrently)."""
    lists = list(round_s.values())
    return [statistics.mean(times) for times in zip(*lists)]


def bare(folder: Path, server: FakeOpenAI, rounds: int, agents: int, concurrency: int) -> dict:
    before = counted(server)[BARE_MODEL]
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bare_oasis.py"), str(folder), server.base_url,
                          str(rounds), str(concurrency)], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         # its own session, as the run's child has: with the kernel's autogroup
                         # scheduling each session gets its own share of a loaded machine
                         start_new_session=True)
    wall = time.perf_counter() - t0
    result = json.loads(out.stdout.strip().splitlines()[-1])
    steps = agents * rounds * 2
    return {"rounds_s": result["rounds_s"], "wall_s": wall, "setup_s": result["setup_s"],
            "round_s": per_round(result["round_s"]),
            "req_per_step": (counted(server)[BARE_MODEL] - before) / steps, "peak_mib": result["peak_rss_mib"]}


async def ours(folder: Path, server: FakeOpenAI, db_path: Path, concurrency: int) -> dict:
    db = await open_database(db_path)
    runs = SimRuns(db, LocalExecutor(), LLMTarget(server.base_url, OUR_MODEL),
                   RunSettings(idle_s=30.0, progress_interval_s=2.0, llm_concurrency=concurrency))
    before = counted(server)[OUR_MODEL]

    async def progress(fraction, message, **data) -> None:
        pass

    t0, started = time.perf_counter(), time.time()
    await runs.run(folder.name, folder, progress)
    wall = time.perf_counter() - t0
    handle = await runs.executor.attach(folder.name)
    assert handle is not None  # idling after its last round
    status = Path(f"/proc/{handle.pid}/status").read_text()
    peak = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024
    requests = counted(server)[OUR_MODEL] - before
    await runs.release(folder.name)
    await runs.close()
    await db.close()
    rounds_s, steps, first, round_s = 0.0, 0, [], {}
    for platform in ("twitter", "reddit"):
        events = [json.loads(x) for x in (folder / platform / ACTIONS_LOG).read_text().splitlines()]
        start = next(e["ts"] for e in events if e["type"] == "round_start")
        end = next(e["ts"] for e in events if e["type"] == "simulation_end")
        rounds_s = max(rounds_s, end - start)
        first.append(start)
        starts = {e["round"]: e["ts"] for e in events if e["type"] == "round_start"}
        round_s[platform] = [e["ts"] - starts[e["round"]] for e in events if e["type"] == "round_end"]
        steps += sum(e["llm_steps"] for e in events if e["type"] == "round_end")
    return {"rounds_s": rounds_s, "wall_s": wall, "setup_s": min(first) - started, "round_s": per_round(round_s),
            "req_per_step": requests / steps, "peak_mib": peak}


def show(name: str, r: dict) -> None:
    rs = r["round_s"]
    print(f"  {name:5} rounds {r['rounds_s']:7.2f} s  wall {r['wall_s']:7.2f} s  set-up {r['setup_s']:6.2f} s  "
          f"a round: first {rs[0]:6.2f} s last {rs[-1]:6.2f} s mean {statistics.mean(rs):6.2f} s  "
          f"requests/agent-step {r['req_per_step']:.2f}  dropped mid-request {r['dropped']:.0f}  "
          f"peak RSS {r['peak_mib']:.0f} MiB", flush=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds the fake LLM takes per answer")
    ap.add_argument("--concurrency", type=int, default=128, help="agent requests in flight per platform "
                    "(both variants; 128 is oasis's default)")
    ap.add_argument("--together", action="store_true", help="run the two variants of a rep at the same time")
    ap.add_argument("--bare-rounds", type=int, help="rounds of bare oasis (default: --rounds)")
    args = ap.parse_args()
    bare_rounds = args.bare_rounds or args.rounds
    results: dict[str, list[dict]] = {"bare": [], "ours": []}
    with (FakeOpenAI(CountByModel(SocialResponder(delay=args.delay)), keep_requests=False) as server,
          tempfile.TemporaryDirectory() as tmp):
        print(f"{args.agents} agents x {args.rounds} rounds (bare oasis {bare_rounds}) x 2 platforms, "
              f"fake LLM delay {args.delay} s, "
              f"{args.concurrency} requests in flight per platform")
        for rep in range(args.reps):
            folders = {}
            for variant in ("bare", "ours"):
                folders[variant] = folder = Path(tmp) / f"{variant}{rep}"
                make_sim_folder(folder, agents=args.agents, rounds=args.rounds, sim_id=folder.name,
                                everyone_everywhere=True)

            def run_bare(folder: Path = folders["bare"]) -> dict:
                return bare(folder, server, bare_rounds, args.agents, args.concurrency)

            def run_ours(folder: Path = folders["ours"], db: Path = Path(tmp) / f"bot{rep}.sqlite3"):
                return ours(folder, server, db, args.concurrency)

            dropped = server.dropped
            if args.together:
                pair = await asyncio.gather(asyncio.to_thread(run_bare), run_ours())
                for variant, r in zip(("bare", "ours"), pair):
                    r["dropped"] = server.dropped - dropped   # both variants' at once
                    results[variant].append(r)
                    show(variant, r)
                continue
            for variant in ("bare", "ours"):  # alternate, so drift on a shared machine hits both
                dropped = server.dropped
                r = run_bare() if variant == "bare" else await run_ours()
                r["dropped"] = server.dropped - dropped
                results[variant].append(r)
                show(variant, r)
    med: dict[str, dict[str, Any]] = {v: {k: statistics.median(r[k] for r in rs) if k != "round_s" else
               [statistics.median(x) for x in zip(*(r[k] for r in rs))] for k in rs[0]} for v, rs in results.items()}
    print("medians:")
    for v in ("bare", "ours"):
        show(v, med[v])
    both = min(len(med["ours"]["round_s"]), len(med["bare"]["round_s"]))   # the rounds both variants ran
    rounds = (f"rounds {med['ours']['rounds_s'] / med['bare']['rounds_s']:.3f}  "
              f"wall {med['ours']['wall_s'] / med['bare']['wall_s']:.3f}  " if bare_rounds == args.rounds else "")
    print(f"ratio ours/bare: {rounds}a round (mean of the first {both}) "
          f"{statistics.mean(med['ours']['round_s'][:both]) / statistics.mean(med['bare']['round_s'][:both]):.3f}  "
          f"peak RSS {med['ours']['peak_mib'] / med['bare']['peak_mib']:.3f}  (target wall <= 1.10)")
    print(f"LLM requests per active agent-step: ours {med['ours']['req_per_step']:.2f}, "
          f"bare {med['bare']['req_per_step']:.2f} (target 1)")


if __name__ == "__main__":
    asyncio.run(main())
