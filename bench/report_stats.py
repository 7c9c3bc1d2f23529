"""Report step costs apart from the LLM: statistics and charts over runs of two sizes, side by side.

Each run is made by camel-oasis's own Platform (real schema and bookkeeping) with seeded random
actions, plus the actions.jsonl the run step writes. Prints seconds per phase and the ratio of
the large run to the small one.

    python bench/report_stats.py [--small 30x6] [--large 200x24]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.sim.report.charts import draw_charts  # noqa: E402
from engine.sim.report.stats import compute_stats  # noqa: E402


async def make_platform(folder: Path, platform: str, agents: int, rounds: int, seed: int) -> int:
    from oasis.social_platform.platform import Platform

    rng = random.Random(seed)
    (folder / platform).mkdir(parents=True)
    plat = Platform(str(folder / platform / f"{platform}.db"),
                    recsys_type="random" if platform == "twitter" else "reddit")
    for i in range(agents):
        await plat.sign_up(i, (f"agent{i}", f"Agent {i}", "a bio"))
    actions = 0
    posts = 0
    with (folder / platform / "actions.jsonl").open("w") as log:
        for rnd in range(rounds):
            plat.sandbox_clock.time_step = rnd
            for agent in rng.sample(range(agents), max(1, agents // 2)):   # half the agents act per round
                roll = rng.random()
                if posts == 0 or roll < 0.3:
                    result = await plat.create_post(agent, f"post by {agent} in round {rnd}")
                    posts += result["success"]
                elif roll < 0.6:
                    result = await plat.like_post(agent, rng.randint(1, posts))
                elif roll < 0.8:
                    result = await plat.create_comment(agent, (rng.randint(1, posts), "a comment"))
                elif roll < 0.9:
                    result = await plat.follow(agent, rng.randrange(agents))
                else:
                    result = await plat.repost(agent, rng.randint(1, posts))
                    posts += result["success"]
                if result["success"]:
                    row = plat.db.execute("SELECT action, info FROM trace ORDER BY rowid DESC LIMIT 1").fetchone()
                    log.write(json.dumps({"type": "action", "round": rnd, "agent_id": agent, "action": row[0],
                                          "info": json.loads(row[1])}) + "\n")
                    actions += 1
            log.write(json.dumps({"type": "round_end", "round": rnd}) + "\n")
    plat.db.close()
    return actions


def measure(folder: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    stats = compute_stats(folder)
    t1 = time.perf_counter()
    draw_charts(stats, folder)
    t2 = time.perf_counter()
    return {"stats_s": t1 - t0, "charts_s": t2 - t1, "posts": len(stats.posts),
            "interactions": len(stats.interactions)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", default="30x6", help="AGENTSxROUNDS")
    parser.add_argument("--large", default="200x24", help="AGENTSxROUNDS")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)   # importing oasis writes ./log
        for label, size in (("small", args.small), ("large", args.large)):
            agents, rounds = map(int, size.split("x"))
            folder = Path(tmp) / label
            acted = sum(asyncio.run(make_platform(folder, p, agents, rounds, seed=i))
                        for i, p in enumerate(("twitter", "reddit")))
            measure(folder)   # warm-up: imports, font cache
            results[label] = {"agents": agents, "rounds": rounds, "actions": acted, **measure(folder)}
    print(f"{'run':<6} {'agents':>6} {'rounds':>6} {'actions':>8} {'posts':>6} {'edges':>6} "
          f"{'stats s':>8} {'charts s':>9}")
    for label, r in results.items():
        print(f"{label:<6} {r['agents']:>6} {r['rounds']:>6} {r['actions']:>8} {r['posts']:>6} "
              f"{r['interactions']:>6} {r['stats_s']:>8.3f} {r['charts_s']:>9.3f}")
    s, big = results["small"], results["large"]
    print(f"large/small: actions x{big['actions'] / s['actions']:.1f}, stats x{big['stats_s'] / s['stats_s']:.1f}, "
          f"charts x{big['charts_s'] / s['charts_s']:.1f}")


if __name__ == "__main__":
    main()
