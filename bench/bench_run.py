"""Step 4 against a bare camel-oasis script: same agents, rounds and fake LLM, in one run.

    python bench/bench_run.py [--agents 30] [--rounds 6] [--reps 2] [--delay 0.0]

Both variants run both platforms in one process against one fake OpenAI-compatible server
(tests/fakes/openai_server.py, answering with valid tool calls). Ours is the whole step: the
run service in this process (database, progress, checkpoints) and the child it starts. Prints
per variant: wall time of the rounds, wall time from process start, LLM requests per active
agent-step and the child's peak RSS; then the ratios (ours / bare, medians over the reps).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.db import open_database  # noqa: E402
from engine.sim.run.protocol import ACTIONS_LOG  # noqa: E402
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns  # noqa: E402
from engine.sim.run.executor import LocalExecutor  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, SocialResponder  # noqa: E402
from tests.sim_fixture import make_sim_folder  # noqa: E402


def tool_requests(server: FakeOpenAI, since: int) -> int:
    return sum(1 for r in server.requests[since:] if r.get("tools"))


def bare(folder: Path, server: FakeOpenAI, rounds: int, agents: int, concurrency: int) -> dict:
    before = len(server.requests)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bare_oasis.py"), str(folder), server.base_url,
                          str(rounds), str(concurrency)], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - t0
    result = json.loads(out.stdout.strip().splitlines()[-1])
    steps = agents * rounds * 2
    return {"rounds_s": result["rounds_s"], "wall_s": wall, "req_per_step": tool_requests(server, before) / steps,
            "peak_mib": result["peak_rss_mib"]}


async def ours(folder: Path, server: FakeOpenAI, db_path: Path, concurrency: int) -> dict:
    db = await open_database(db_path)
    runs = SimRuns(db, LocalExecutor(), LLMTarget(server.base_url, "fake-model"),
                   RunSettings(idle_s=30.0, progress_interval_s=2.0, llm_concurrency=concurrency))
    before = len(server.requests)

    async def progress(fraction, message, **data) -> None:
        pass

    t0 = time.perf_counter()
    await runs.run(folder.name, folder, progress)
    wall = time.perf_counter() - t0
    handle = await runs.executor.attach(folder.name)
    status = Path(f"/proc/{handle.pid}/status").read_text()
    peak = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024
    requests = tool_requests(server, before)
    await runs.release(folder.name)
    await runs.close()
    await db.close()
    rounds_s, steps = 0.0, 0
    for platform in ("twitter", "reddit"):
        events = [json.loads(x) for x in (folder / platform / ACTIONS_LOG).read_text().splitlines()]
        start = next(e["ts"] for e in events if e["type"] == "round_start")
        end = next(e["ts"] for e in events if e["type"] == "simulation_end")
        rounds_s = max(rounds_s, end - start)
        steps += sum(e["llm_steps"] for e in events if e["type"] == "round_end")
    return {"rounds_s": rounds_s, "wall_s": wall, "req_per_step": requests / steps, "peak_mib": peak}


def show(name: str, r: dict) -> None:
    print(f"  {name:5} rounds {r['rounds_s']:6.2f} s  wall {r['wall_s']:6.2f} s  "
          f"requests/agent-step {r['req_per_step']:.2f}  peak RSS {r['peak_mib']:.0f} MiB")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds the fake LLM takes per answer")
    ap.add_argument("--concurrency", type=int, default=128, help="agent requests in flight per platform "
                    "(both variants; 128 is oasis's default)")
    args = ap.parse_args()
    results: dict[str, list[dict]] = {"bare": [], "ours": []}
    with FakeOpenAI(SocialResponder(delay=args.delay)) as server, tempfile.TemporaryDirectory() as tmp:
        print(f"{args.agents} agents x {args.rounds} rounds x 2 platforms, fake LLM delay {args.delay} s, "
              f"{args.concurrency} requests in flight per platform")
        for rep in range(args.reps):
            for variant in ("bare", "ours"):  # alternate, so drift on a shared machine hits both
                folder = Path(tmp) / f"{variant}{rep}"
                make_sim_folder(folder, agents=args.agents, rounds=args.rounds, sim_id=folder.name,
                                everyone_everywhere=True)
                if variant == "bare":
                    r = bare(folder, server, args.rounds, args.agents, args.concurrency)
                else:
                    r = await ours(folder, server, Path(tmp) / f"bot{rep}.sqlite3", args.concurrency)
                results[variant].append(r)
                show(variant, r)
    med = {v: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for v, rs in results.items()}
    print("medians:")
    for v in ("bare", "ours"):
        show(v, med[v])
    print(f"ratio ours/bare: rounds {med['ours']['rounds_s'] / med['bare']['rounds_s']:.3f}  "
          f"wall {med['ours']['wall_s'] / med['bare']['wall_s']:.3f}  "
          f"peak RSS {med['ours']['peak_mib'] / med['bare']['peak_mib']:.3f}  (target wall <= 1.10)")
    print(f"LLM requests per active agent-step: ours {med['ours']['req_per_step']:.2f}, "
          f"bare {med['bare']['req_per_step']:.2f} (target 1)")


if __name__ == "__main__":
    asyncio.run(main())
