"""How late an injected event reaches the platforms' databases: requested round vs the round of
its post.

    python bench/inject.py [--agents 10] [--rounds 8] [--delay 0.05]

A real run (the run service in this process, its child with camel-oasis on both platforms)
against the fake OpenAI-compatible server (tests/fakes/openai_server.py, valid tool calls after
``--delay`` seconds). Events are injected through ``engine.sim.inject.request`` the way ``/sim inject``
does: two before the run for a later round, then, while it runs, one as soon as each round has
ended (for the default round, the next not begun: the tightest case) and one for the round after
that. Each event's post is read back from both platforms' databases; its round is the post's
sandbox time (Twitter: seconds since the start; Reddit: the simulated datetime). Prints, per
event, the requested round, the round of its post on each platform and the lateness (round in
the database minus the round requested; target 0).
"""
from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.db import open_database  # noqa: E402
from engine.sim.inject.request import inject  # noqa: E402
from engine.sim.run.child.injector import SOURCE_BIO  # noqa: E402
from engine.sim.run.child.oasis_setup import sim_start_time  # noqa: E402
from engine.sim.run.executor import LocalExecutor  # noqa: E402
from engine.sim.run.output import platform_db  # noqa: E402
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, SocialResponder  # noqa: E402
from tests.helpers.sim import make_sim_folder  # noqa: E402


def post_rounds(folder: Path, platform: str, cfg) -> dict[str, int]:
    """Text -> round (from 1) of each post of a source account, from the post's sandbox time."""
    seconds_per_round = cfg.time.minutes_per_round * 60
    start = sim_start_time(cfg)
    with sqlite3.connect(platform_db(folder, platform)) as conn:
        rows = conn.execute("SELECT p.content, p.created_at FROM post p JOIN user u ON u.user_id = p.user_id"
                            " WHERE u.bio = ?", (SOURCE_BIO,)).fetchall()
    out = {}
    for text, created in rows:
        seconds = (int(created) if str(created).isdigit()
                   else (datetime.fromisoformat(str(created)) - start).total_seconds())
        out[text] = int(seconds // seconds_per_round) + 1
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--delay", type=float, default=0.05, help="seconds the fake LLM takes per answer")
    args = ap.parse_args()
    with FakeOpenAI(SocialResponder(delay=args.delay)) as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "b1"
        cfg = make_sim_folder(folder, agents=args.agents, rounds=args.rounds, sim_id="b1", everyone_everywhere=True)
        db = await open_database(Path(tmp) / "bot.sqlite3")
        runs = SimRuns(db, LocalExecutor(), LLMTarget(server.base_url, "fake-model"),
                       RunSettings(idle_s=1.0, progress_interval_s=1.0))
        asked: list[tuple[str, int, str]] = []   # text, requested round, when

        async def ask(text: str, round_no: int | None, when: str) -> None:
            done = await inject(runs, "b1", folder, text, round_no=round_no, asked_by="bench")
            asked.append((text, done.injection.round, when))

        await ask("Before the run, for round 3", 3, "before the run")
        await ask(f"Before the run, for round {args.rounds}", args.rounds, "before the run")

        async def progress(fraction, message, **data) -> None:
            pass

        run = asyncio.create_task(runs.run("b1", folder, progress))
        seen = 0
        while not run.done():
            state = await runs.get("b1")
            done = max(state.rounds_done.values(), default=0) if state else 0
            if state and state.live and done > seen and done + 2 <= args.rounds:
                seen = done
                await ask(f"After round {done}, default round", None, f"live, after round {done}")
                if done + 3 <= args.rounds:
                    await ask(f"After round {done}, for round {done + 3}", done + 3, f"live, after round {done}")
            await asyncio.sleep(0.02)
        await run
        await runs.release("b1")
        await runs.close()
        await db.close()
        published = {p: post_rounds(folder, p, cfg) for p in ("twitter", "reddit")}
    print(f"{args.agents} agents x {args.rounds} rounds x 2 platforms, fake LLM delay {args.delay} s")
    print(f"| {'asked':22} | requested | twitter | reddit | lateness |")
    print(f"|{'-' * 24}|-----------|---------|--------|----------|")
    worst = 0
    for text, requested, when in asked:
        got = [published[p].get(text) for p in ("twitter", "reddit")]
        late = [g - requested for g in got if g is not None]
        missing = sum(g is None for g in got)
        worst = max([worst, *late]) if late else worst
        shown = ", ".join(map(str, sorted(set(late)))) + (f" ({missing} missing)" if missing else "")
        print(f"| {when:22} | {requested:9} | {got[0] or '-':>7} | {got[1] or '-':>6} | {shown:>8} |")
    print(f"{len(asked)} events, {sum(len(v) for v in published.values())} posts; "
          f"worst lateness {worst} rounds (target 0)")


if __name__ == "__main__":
    asyncio.run(main())
