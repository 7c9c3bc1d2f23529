"""Fork start time (state copy, no LLM) and the disk cost of fork points per round.

    python bench/fork.py [--sizes 30x12,100x24] [--real-rounds 0] [--reps 3]

For each size AGENTSxROUNDS a parent runs for real (the run service and its child, camel-oasis,
the fake OpenAI-compatible server of tests/fakes answering with valid tool calls; every agent
active once a round on both platforms), then ``engine.sim.fork.fork_simulation`` forks it after
its last round but one, ``--reps`` times; the time is the whole call (checks, folder, database
copies, log prefix, linked fork points, rows). Disk: the bytes of each round's fork point
(the platform database and the agents' memories; the latest one shares its files with the
checkpoint), per platform, averaged over the rounds.

``--real-rounds R`` (0: all) runs only R rounds of a larger parent and then makes its state as
large as after ROUNDS rounds: the platform databases' rows and the actions log are repeated
ROUNDS / R times (new ids), the memories stay as after round R (they are bounded by
``agent_memory_rounds``), and rounds R+1..ROUNDS get fork points linked to the real ones, the
last with the enlarged database. The fork time depends on these sizes, not on their content.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import parse_config  # noqa: E402
from engine.db import open_database  # noqa: E402
from engine.sim.fork import fork_simulation  # noqa: E402
from engine.sim.run import fork_points  # noqa: E402
from engine.sim.run.executor import LocalExecutor  # noqa: E402
from engine.sim.run.output import ACTIONS_LOG, CHECKPOINT, CHECKPOINT_DB, MEMORY_FILE, PLATFORMS  # noqa: E402
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, SocialResponder  # noqa: E402
from tests.helpers.sim import make_sim_folder  # noqa: E402


async def run_parent(db, folder: Path, server: FakeOpenAI, agents: int, rounds: int, run_rounds: int) -> float:
    sim_id = folder.name
    make_sim_folder(folder, agents=agents, rounds=rounds, sim_id=sim_id, everyone_everywhere=True)
    await db.execute("INSERT INTO simulations(id, scope, requirement, spec, folder, created_at)"
                     " VALUES (?, 'bench', 'toll?', ?, ?, 'now')",
                     (sim_id, json.dumps({"documents": [], "requirement": "toll?", "rounds": rounds}), str(folder)))
    for step in ("ontology", "graph", "environment"):
        await db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES (?, ?, 'now')", (sim_id, step))
    runs = SimRuns(db, LocalExecutor(), LLMTarget(server.base_url, "fake-model"),
                   RunSettings(idle_s=0.0, progress_interval_s=5.0, max_rounds=run_rounds))

    async def progress(fraction, message, **data) -> None:
        pass

    t0 = time.perf_counter()
    await runs.run(sim_id, folder, progress)
    await runs.close()
    return time.perf_counter() - t0


def _enlarge_db(path: Path, times: int) -> None:
    """Repeat the rows of the platform's tables ``times`` times in all, with new integer keys
    (trace rows, unique by user, time, action and info, get a mark on their time; a table whose
    other unique keys forbid copies, like the recommendation cache, keeps its rows)."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'"
                                             " AND name NOT LIKE 'sqlite_%'")]
        for table in tables:
            cols = conn.execute(f"PRAGMA table_info({table})").fetchall()
            pk = next((c[1] for c in cols if c[5] == 1 and c[2].upper() == "INTEGER"), None)
            if pk is None or table == "user":  # the same agents, more of what they did
                continue
            names = [c[1] for c in cols]
            top = conn.execute(f"SELECT coalesce(max({pk}), 0) FROM {table}").fetchone()[0]
            for i in range(1, times):
                picks = ", ".join(f"{n} + {top * i}" if n == pk else f"{n} || ' #{i}'" if n == "created_at" else n
                                  for n in names)
                try:
                    conn.execute(f"INSERT INTO {table}({', '.join(names)}) SELECT {picks} FROM {table}"
                                 f" WHERE {pk} <= {top}")
                except sqlite3.IntegrityError:
                    break


def enlarge(folder: Path, real: int, rounds: int) -> None:
    """Make the parent's state that of ``rounds`` rounds (see the module docstring)."""
    times = max(1, round(rounds / real))
    for p in PLATFORMS:
        pdir = folder / p
        lines = (pdir / ACTIONS_LOG).read_text(encoding="utf-8").splitlines(keepends=True)
        (pdir / ACTIONS_LOG).write_text("".join(lines * times), encoding="utf-8")
        _enlarge_db(pdir / CHECKPOINT_DB, times)
        shutil.copyfile(pdir / CHECKPOINT_DB, pdir / f"{p}.db")
        last = fork_points.point_dir(folder, p, real)
        for r in range(real + 1, rounds + 1):
            dst = fork_points.point_dir(folder, p, r)
            dst.mkdir()
            for name in (f"{p}.db", MEMORY_FILE):
                fork_points.link_or_copy(last / name, dst / name)
            (dst / fork_points.POINT_ACTIONS).write_text(json.dumps(
                {"bytes": (pdir / ACTIONS_LOG).stat().st_size, "actions": 0, "trace_rowid": 0}))
        for r in (rounds - 1, rounds):
            (fork_points.point_dir(folder, p, r) / f"{p}.db").unlink()
            fork_points.link_or_copy(pdir / CHECKPOINT_DB, fork_points.point_dir(folder, p, r) / f"{p}.db")
        memory = json.loads((pdir / MEMORY_FILE).read_text())
        (pdir / MEMORY_FILE).write_text(json.dumps({**memory, "rounds_done": rounds}))
        (pdir / CHECKPOINT).write_text(json.dumps({"rounds_done": rounds, "trace_rowid": 0}))


async def bench(size: str, real_rounds: int, reps: int, server: FakeOpenAI, tmp: Path) -> None:
    agents, rounds = (int(x) for x in size.split("x"))
    real = real_rounds if 0 < real_rounds < rounds else rounds
    config = parse_config({"bot": {"data_dir": str(tmp / f"data{size}")}})
    db = await open_database(tmp / f"bench{size}.sqlite3")
    folder = tmp / f"p{size}"
    run_s = await run_parent(db, folder, server, agents, rounds, real)
    per_round = {p: statistics.mean(s.values()) for p, s in fork_points.sizes(folder).items()}
    if real < rounds:
        enlarge(folder, real, rounds)
        await db.execute("UPDATE sim_runs SET rounds_done=? WHERE sim_id=?",
                         (json.dumps({p: rounds for p in PLATFORMS}), folder.name))
    k = rounds - 1
    point_bytes = sum((fork_points.point_dir(folder, p, k) / f"{p}.db").stat().st_size for p in PLATFORMS)
    log_bytes = sum((fork_points.read_point(folder, p, k) or {})["bytes"] for p in PLATFORMS)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        await fork_simulation(db, config, folder.name, k, inject="The council scraps the toll")
        times.append(time.perf_counter() - t0)
    await db.close()
    how = f"{real} real rounds, state enlarged to {rounds}" if real < rounds else f"{rounds} real rounds"
    print(f"{agents} agents x {rounds} rounds ({how}; parent run {run_s:.0f} s): fork after round {k}: "
          f"median {statistics.median(times):.3f} s, max {max(times):.3f} s over {reps} (target <= 5 s); "
          f"databases at round {k} {point_bytes / 2**20:.1f} MiB, actions logs {log_bytes / 2**20:.1f} MiB")
    print("  fork point disk per round: " + ", ".join(
        f"{p} {b / 2**20:.2f} MiB" for p, b in per_round.items())
          + f" (both: {sum(per_round.values()) / 2**20:.2f} MiB per round of {real} real)")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="30x12,100x24", help="AGENTSxROUNDS, comma-separated")
    ap.add_argument("--real-rounds", type=int, default=0, help="rounds run for real (0: all)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with FakeOpenAI(SocialResponder()) as server, tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            await bench(size, args.real_rounds, args.reps, server, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
