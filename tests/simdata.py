"""A small finished simulation built with camel-oasis's own Platform (no LLM): real schema,
real bookkeeping (counters, reposts, quotes), plus the actions.jsonl the run step writes.

Six agents, three rounds, Twitter and Reddit. The expected figures in the report tests are
worked out by hand from the script below.
"""
from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank"]
A, B, C, D, E, F = range(6)

# (round, agent, action, argument) per platform; post ids follow oasis's autoincrement.
TWITTER = [
    (1, A, "create_post", "The city council announced a 20% transit fare hike."),
    (1, B, "create_post", "I oppose the fare hike, it hurts commuters."),
    (1, C, "like_post", 1),
    (1, D, "repost", 1),                                   # post 3
    (2, E, "like_post", 1),
    (2, F, "quote_post", (2, "Agreed, commuters pay enough already.")),  # post 4
    (2, B, "follow", A),
    (2, C, "like_post", 2),
    (3, A, "like_post", 4),
    (3, D, "follow", A),
    (3, E, "do_nothing", None),
]
REDDIT = [
    (1, C, "create_post", "Discussion: what will the fare hike do to ridership?"),
    (1, A, "create_comment", (1, "Ridership will drop in the first month.")),
    (2, B, "like_post", 1),
    (2, D, "create_comment", (1, "People will switch to bikes.")),
    (2, E, "dislike_post", 1),
    (3, F, "create_post", "Petition against the hike is live."),
    (3, C, "like_post", 2),
]


async def _play(sim_dir: Path, platform: str, script) -> None:
    from oasis.social_platform.platform import Platform

    folder = sim_dir / platform
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"{platform}.db"
    plat = Platform(str(db), recsys_type="random" if platform == "twitter" else "reddit",
                    allow_self_rating=False, show_score=platform == "reddit")
    for i, name in enumerate(NAMES):
        await plat.sign_up(i, (name, name.title(), f"{name} lives in the city"))
    log = (folder / "actions.jsonl").open("w", encoding="utf-8")
    for rnd in (1, 2, 3):
        plat.sandbox_clock.time_step = rnd
        log.write(json.dumps({"event": "round_start", "round": rnd}) + "\n")
        for r, agent, action, arg in script:
            if r != rnd:
                continue
            fn = getattr(plat, action)
            result = await (fn(agent) if arg is None else fn(agent, arg))
            assert result["success"], (platform, action, result)
            log.write(json.dumps({"round": rnd, "platform": platform, "agent_id": agent,
                                  "agent_name": NAMES[agent], "action": action,
                                  "info": result}) + "\n")
        log.write(json.dumps({"event": "round_end", "round": rnd}) + "\n")
    log.write(json.dumps({"event": "simulation_end", "rounds": 3}) + "\n")
    log.write('{"round": 3, "action": "crea')   # a line cut short by a crash
    log.close()
    plat.db.close()


def build_simulation(sim_dir: Path, scripts: dict | None = None) -> Path:
    """Write the sample run into ``sim_dir``; oasis writes its ./log files into sim_dir too."""
    sim_dir.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(sim_dir)   # importing oasis creates ./log
    try:
        for platform, script in (scripts or {"twitter": TWITTER, "reddit": REDDIT}).items():
            asyncio.run(_play(sim_dir, platform, script))
    finally:
        os.chdir(cwd)
    return sim_dir


def build_empty(sim_dir: Path) -> Path:
    """A run where everyone signed up and nobody acted."""
    return build_simulation(sim_dir, {"twitter": [], "reddit": []})


_built: dict[str, Path] = {}


def sample_simulation(tmp_path_factory, tmp_path: Path) -> Path:
    """A private copy of the sample run for one test (built once per test session)."""
    import shutil

    if "sim" not in _built:
        _built["sim"] = build_simulation(tmp_path_factory.mktemp("oasis-sample") / "sim")
    copy = tmp_path / "sim"
    shutil.copytree(_built["sim"], copy, ignore=shutil.ignore_patterns("log", "report"))
    return copy
