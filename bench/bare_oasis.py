"""A bare camel-oasis script: the baseline bench_run.py compares the run step against.

    python bench/bare_oasis.py <simulation folder> <base_url> <rounds> <requests in flight>

What any offline camel-oasis script needs and nothing more: the profile files through oasis's
own agent-graph generators, the same offline recommenders, a token counter that downloads
nothing, OASIS_DB_PATH, both platforms in one loop, every agent acting once per round after
the initial posts. Prints one JSON line with its timings and peak memory.
"""
from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


async def main(folder: Path, base_url: str, rounds: int, concurrency: int) -> dict:
    t0 = time.perf_counter()
    import oasis
    from camel.models import ModelFactory
    from camel.types import ModelPlatformType
    from oasis import ActionType, LLMAction, ManualAction

    from engine.sim.environment.models import SimulationConfig
    from engine.sim.run.child.oasis_setup import make_token_counter

    cfg = SimulationConfig.model_validate_json((folder / "simulation_config.json").read_text())
    model = ModelFactory.create(ModelPlatformType.OPENAI_COMPATIBLE_MODEL, "fake-model",
                                model_config_dict={"max_tokens": 8192}, url=base_url, api_key="x",
                                token_counter=make_token_counter())
    envs = {}
    for name, recsys in (("twitter", "random"), ("reddit", "reddit")):
        db = folder / f"bare_{name}.db"
        db.unlink(missing_ok=True)
        if name == "twitter":
            graph = await oasis.generate_twitter_agent_graph(str(folder / "twitter_profiles.csv"), model,
                                                             ActionType.get_default_twitter_actions())
        else:
            graph = await oasis.generate_reddit_agent_graph(str(folder / "reddit_profiles.json"), model,
                                                            ActionType.get_default_reddit_actions())
        platform = oasis.Platform(db_path=str(db), recsys_type=recsys, refresh_rec_post_count=5,
                                  max_rec_post_len=5, following_post_count=3)
        envs[name] = oasis.make(agent_graph=graph, platform=platform, database_path=str(db),
                                semaphore=concurrency)
        await envs[name].reset()
    t_ready = time.perf_counter()

    round_s: dict[str, list[float]] = {name: [] for name in envs}

    async def run(name: str, env) -> None:
        posts: dict[str, Any] = {}
        for p in cfg.events.initial_posts:
            posts.setdefault(env.agent_graph.get_agent(p.agent_id), []).append(
                ManualAction(ActionType.CREATE_POST, {"content": p.content}))
        await env.step(posts)
        for _ in range(rounds):
            t = time.perf_counter()
            await env.step({agent: LLMAction() for _, agent in env.agent_graph.get_agents()})
            round_s[name].append(time.perf_counter() - t)

    await asyncio.gather(*(run(name, env) for name, env in envs.items()))
    t_done = time.perf_counter()
    for env in envs.values():
        await env.close()
    return {"setup_s": t_ready - t0, "rounds_s": t_done - t_ready, "total_s": t_done - t0,
            "round_s": round_s,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


if __name__ == "__main__":
    folder = Path(sys.argv[1]).resolve()
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # oasis prints to stdout; keep it for the result line
    os.chdir(folder)
    os.environ["OASIS_DB_PATH"] = str(folder / "bare_twitter.db")
    result = asyncio.run(main(folder, sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    channel.write(json.dumps(result) + "\n")
    channel.flush()
