"""What an ensemble costs: N runs against one set of steps 1-3 plus each run's step 4 alone.

    python -m bench.ensemble [--runs 3] [--agents 10] [--rounds 4] [--parallel 0]

N + 1 simulations of the same document, requirement and sizes, each the CLI's
`python -m bot simulate` in this process against a fake OpenAI-compatible endpoint (tests/fakes:
the pipeline's responder, usage reported as about four characters per token): run K's seed
simulated alone, one simulation per K (its `[simulation] seed` is run K's: run 1's is 7, the
others derived from it, engine.sim.ensemble.members.run_seed), then the ensemble of N runs with
seed 7, whose run K draws from that same seed. Every request the endpoint answers is counted by
what asked for it: steps 1-3 (ontology, extraction, personas, event plan), step 4 (the agents'
steps, which carry their run's seed, and the stance classification after each round) and the
report (its interviews of the agents included). Step 4's wall time is read from the simulation's
checkpoints (the environment step's end to the run step's end, whole seconds): the child starts
included. Prints each simulation, then the ensemble against steps 1-3 once + the N step 4s alone.
The fake model answers by the order of requests, not by the seed, so a run alone and the same
run in an ensemble act alike but not identically.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import re
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from bot.cli import main
from engine.config import load_config
from engine.db import open_database
from engine.sim.ensemble.members import run_seed
from tests.fakes.openai_server import FakeOpenAI, Metered
from tests.fakes.report_responder import PipelineResponder, ReportWriter
from tests.fakes.sim_responder import kind_of
from tests.fakes.stance_responder import StanceResponder
from tests.helpers.config import llm, write_config
from tests.helpers.sim import SAMPLE

SEED = 7


class Counted:
    """Answers as ``Metered(PipelineResponder())`` and adds up requests and tokens per phase."""

    def __init__(self):
        self.answer = Metered(PipelineResponder())
        self.phases: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def phase(body: dict) -> str:
        if StanceResponder.handles(body) or ("seed" in body and body.get("tools")):
            return "step 4"     # an agent's step (it carries its run's seed) or a round's stances
        if ReportWriter.handles(body) or "seed" in body:
            return "report"     # the report agent, and its interviews of the live agents
        return "steps 1-3" if kind_of(body) != "chat" else "other"

    def __call__(self, body: dict):
        reply = self.answer(body)
        usage = reply["usage"]["total_tokens"] if isinstance(reply, dict) else 0
        with self._lock:
            calls, tokens = self.phases.setdefault(self.phase(body), [0, 0])
            self.phases[self.phase(body)] = [calls + 1, tokens + usage]
        return reply


async def step_4_wall(cfg: Path, sim_id: str) -> float:
    """Seconds from the end of step 3 to the end of step 4 (their checkpoints)."""
    db = await open_database(load_config(cfg).db_url)
    try:
        done = {r["step"]: datetime.fromisoformat(r["finished_at"]) for r in await db.fetchall(
            "SELECT step, finished_at FROM sim_steps WHERE sim_id = ?", (sim_id,))}
    finally:
        await db.close()
    return (done["run"] - done["environment"]).total_seconds()


def simulate(tmp: Path, runs: int, seed: int, agents: int, rounds: int, parallel: int) -> dict:
    tmp.mkdir(parents=True)
    with FakeOpenAI() as server:
        counted = Counted()
        server.responder = counted
        cfg = write_config(tmp, {"llm": llm(server), "simulation": {"seed": seed, "parallel_runs": parallel,
                                                                   "run_idle_s": 1.0}})
        out, err = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--config", str(cfg), "simulate", str(SAMPLE), "-r", "Will Valmora accept the port "
                         "automation?", "--agents", str(agents), "--rounds", str(rounds), "--runs", str(runs),
                         "--out", str(tmp / "sim")])
        wall = time.perf_counter() - t0
        if code != 0:
            raise SystemExit(err.getvalue()[-2000:])
        confidence = re.search(r"^confidence: (.+)$", out.getvalue(), re.M)
        started = re.search(r"^simulation (\w+):", out.getvalue(), re.M)
        if started is None:
            raise SystemExit("the simulation's id is not in its output:\n" + out.getvalue()[-2000:])
        sim_id = started[1]
        return {"phases": counted.phases, "wall_s": wall, "step4_s": asyncio.run(step_4_wall(cfg, sim_id)),
                "confidence": confidence[1] if confidence else ""}


def show(name: str, r: dict) -> None:
    parts = "  ".join(f"{p}: {c} calls {t:,} tokens" for p, (c, t) in sorted(r["phases"].items()))
    print(f"{name:16} {parts}  | step 4 {r['step4_s']:.0f} s, whole {r['wall_s']:.1f} s")


def main_bench() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=0, help="[simulation] parallel_runs (0: half the CPUs)")
    args = ap.parse_args()
    n = args.runs
    with tempfile.TemporaryDirectory() as tmp:
        alone = [simulate(Path(tmp) / f"alone{k}", 1, run_seed(SEED, k), args.agents, args.rounds, args.parallel)
                 for k in range(1, n + 1)]
        many = simulate(Path(tmp) / "many", n, SEED, args.agents, args.rounds, args.parallel)
    print(f"{args.agents} agents x {args.rounds} rounds; ensemble of {n} runs, parallel_runs "
          f"{args.parallel or 'derived'}")
    for k, r in enumerate(alone, 1):
        show(f"run {k} alone", r)
    show(f"{n} runs", many)
    for unit, i in (("calls", 0), ("tokens", 1)):
        shared = alone[0]["phases"]["steps 1-3"][i]
        step4 = sum(r["phases"]["step 4"][i] for r in alone)
        got = many["phases"]["steps 1-3"][i] + many["phases"]["step 4"][i]
        print(f"steps 1-4 {unit}: ensemble {got:,} vs steps 1-3 once + the {n} step 4s alone {shared + step4:,} "
              f"(ratio {got / (shared + step4):.3f}); its steps 1-3 {many['phases']['steps 1-3'][i]:,} "
              f"(one run's: {shared:,}), its step 4 {many['phases']['step 4'][i]:,} (alone: {step4:,})")
    wall = sum(r["step4_s"] for r in alone)
    print(f"step 4 wall: ensemble {many['step4_s']:.0f} s vs the {n} runs alone {wall:.0f} s "
          f"(ratio {many['step4_s'] / wall:.3f}); whole: ensemble {many['wall_s']:.1f} s vs one run "
          f"{alone[0]['wall_s']:.1f} s")
    print(f"ensemble: {many['confidence']}")


if __name__ == "__main__":
    main_bench()
