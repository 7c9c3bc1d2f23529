"""Stance classification cost: LLM calls and tokens per agent-round, measured on real runs.

    python bench/stance_calls.py [--agents 20] [--rounds 4] [--batches 20,5]

For each batch size, one real run (child process, camel-oasis) of ``--agents`` agents on both
platforms, everyone active once a round, against the fake OpenAI server: agents answer with
tool calls (SocialResponder), stance requests get one score per agent (StanceResponder), and
every request reports usage as about 4 characters per token (Metered). The stance observer
(engine.sim.stance.tracking) runs on the run service; its usage is the only usage the ledger records.
Prints per batch size: agent-rounds active, classified (the rest carried their score), stance
calls and tokens, per agent-round and per call, and the estimate's tokens per classified agent
(engine.sim.estimate) for comparison.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import LLMSection  # noqa: E402
from engine.db import open_database  # noqa: E402
from engine.llm import LLMClient  # noqa: E402
from engine.sim import estimate  # noqa: E402
from engine.sim.run.executor import LocalExecutor  # noqa: E402
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns  # noqa: E402
from engine.sim.stance import prompt as stance_prompt, tracking as stance  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Metered, SocialResponder  # noqa: E402
from tests.fakes.stance_responder import WithStances  # noqa: E402
from tests.helpers.sim import make_sim_folder  # noqa: E402


async def measure(server: FakeOpenAI, agents: int, rounds: int, batch: int, work: Path) -> dict:
    folder = work / f"sim-b{batch}"
    make_sim_folder(folder, agents=agents, rounds=rounds, sim_id=f"b{batch}", everyone_everywhere=True)
    db = await open_database(work / f"b{batch}.sqlite3")
    llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", retry_max_wait_s=0.05), db)
    runs = SimRuns(db, LocalExecutor(), LLMTarget(server.base_url, "fake-model"),
                   RunSettings(idle_s=0.0, progress_interval_s=1.0), observers=[stance.observer(db, llm, batch)])

    async def progress(*_args, **_kwargs) -> None:
        pass

    try:
        await runs.run(folder.name, folder, progress, job_id="bench", scope="bench")
        active = await db.fetchval("SELECT count(*) FROM sim_stances")
        classified = active - await db.fetchval("SELECT count(*) FROM sim_stances_carried")
        used = await llm.job_usage("bench")
    finally:
        await runs.executor.close()
        await runs.close()
        await llm.close()
        await db.close()
    return {"batch": batch, "active": active, "classified": classified, "calls": used.calls, "tokens": used.tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", default="20,5")
    args = parser.parse_args()
    per_agent = (estimate.STANCE_AGENT_TOKENS + estimate.STANCE_ANSWER_TOKENS + estimate.STANCE_DEED_TOKENS)
    with FakeOpenAI(Metered(WithStances(SocialResponder()))) as server, tempfile.TemporaryDirectory() as tmp:
        rows = [asyncio.run(measure(server, args.agents, args.rounds, int(b), Path(tmp)))
                for b in args.batches.split(",")]
    print(f"{args.agents} agents x {args.rounds} rounds x 2 platforms, everyone active once a round")
    print("| batch | agent-rounds active | classified | calls | tokens | calls / agent-round | "
          "tokens / agent-round | tokens / call |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['active']} | {r['classified']} | {r['calls']} | {r['tokens']:,} | "
              f"{r['calls'] / r['active']:.3f} | {r['tokens'] / r['active']:.0f} | {r['tokens'] / r['calls']:.0f} |")
    print(f"estimate: {per_agent} tokens per classified agent with one deed, plus "
          f"{len(stance_prompt.SYSTEM) // 4 + estimate.STRUCTURED_OVERHEAD_TOKENS} per call and the requirement")


if __name__ == "__main__":
    main()
