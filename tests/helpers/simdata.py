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

# (round, agent, action, argument) per platform; rounds count from 0 as in the run step;
# post ids follow oasis's autoincrement. The log lines copy the trace rows, as the run step does.
TWITTER = [
    (0, A, "create_post", "The city council announced a 20% transit fare hike."),
    (0, B, "create_post", "I oppose the fare hike, it hurts commuters."),
    (0, C, "like_post", 1),
    (0, D, "repost", 1),                                   # post 3
    (1, E, "like_post", 1),
    (1, F, "quote_post", (2, "Agreed, commuters pay enough already.")),  # post 4
    (1, B, "follow", A),
    (1, C, "like_post", 2),
    (2, A, "like_post", 4),
    (2, D, "follow", A),
    (2, E, "do_nothing", None),
]
REDDIT = [
    (0, C, "create_post", "Discussion: what will the fare hike do to ridership?"),
    (0, A, "create_comment", (1, "Ridership will drop in the first month.")),
    (1, B, "like_post", 1),
    (1, D, "create_comment", (1, "People will switch to bikes.")),
    (1, E, "dislike_post", 1),
    (2, F, "create_post", "Petition against the hike is live."),
    (2, C, "like_post", 2),
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
    for rnd in (0, 1, 2):
        plat.sandbox_clock.time_step = rnd
        log.write(json.dumps({"type": "round_start", "round": rnd}) + "\n")
        for r, agent, action, arg in script:
            if r != rnd:
                continue
            fn = getattr(plat, action)
            result = await (fn(agent) if arg is None else fn(agent, arg))
            assert result["success"], (platform, action, result)
            row = plat.db.execute("SELECT action, info FROM trace ORDER BY rowid DESC LIMIT 1").fetchone()
            log.write(json.dumps({"type": "action", "round": rnd, "agent_id": agent, "action": row[0],
                                  "info": json.loads(row[1])}) + "\n")
        log.write(json.dumps({"type": "round_end", "round": rnd, "actions": 0}) + "\n")
    log.write(json.dumps({"type": "interview", "round": 2, "agent_id": 0, "question": "q", "answer": "a"}) + "\n")
    log.write(json.dumps({"type": "simulation_end", "rounds_done": 3, "stopped": False}) + "\n")
    log.write('{"type": "action", "round": 2, "action": "crea')   # a line cut short by a crash
    log.close()
    plat.db.close()


def build_simulation(sim_dir: Path, scripts: dict | None = None) -> Path:
    """Write the sample run into ``sim_dir``; oasis writes its ./log files into sim_dir too."""
    from concurrent.futures import ThreadPoolExecutor

    sim_dir.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(sim_dir)   # importing oasis creates ./log
    try:
        # in a thread of its own: asyncio.run must not replace the event loop of an async test
        with ThreadPoolExecutor(1) as pool:
            for platform, script in (scripts or {"twitter": TWITTER, "reddit": REDDIT}).items():
                pool.submit(asyncio.run, _play(sim_dir, platform, script)).result()
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


def write_environment(sim_dir: Path, sim_id: str = "sim1") -> None:
    """The step-3 files of the sample run: simulation_config.json and the Reddit personas."""
    from engine.sim.environment.models import CONFIG_FILE, REDDIT_PROFILES, AgentConfig, SimulationConfig

    stances = ["supportive", "opposing", "neutral", "opposing", "observer", "opposing"]
    types = ["Official", "Commuter", "Journalist", "Cyclist", "Student", "Activist"]
    config = SimulationConfig(
        sim_id=sim_id, requirement="How will commuters react to the transit fare hike?",
        agents=[AgentConfig(agent_id=i, name=n.title(), username=n, entity_type=types[i], stance=stances[i])
                for i, n in enumerate(NAMES)])
    (sim_dir / CONFIG_FILE).write_text(config.model_dump_json(indent=2), encoding="utf-8")
    personas = [{"username": n, "bio": f"{types[i]} in the city",
                 "persona": f"{n.title()} is a {types[i].lower()} who takes the bus daily and is {stances[i]} "
                            "about the fare hike.", "age": 30 + i, "gender": "other", "mbti": "INTJ",
                 "country": "NL"} for i, n in enumerate(NAMES)]
    (sim_dir / REDDIT_PROFILES).write_text(json.dumps(personas), encoding="utf-8")


async def write_graph(db, sim_id: str, folder: Path, embedder):
    """A small local knowledge graph, stored by the graph step's GraphStore; one fact superseded."""
    from engine.embedder import Embedder
    from engine.sim.graph.store import GraphStore, NewEdge, NewEntity

    requirement = "How will commuters react to the transit fare hike?"
    await db.execute("INSERT INTO simulations (id, scope, channel, requirement, spec, folder, created_at)"
                     " VALUES (?, 'console:local', 'console', ?, ?, ?, '2026-01-01')",
                     (sim_id, requirement, json.dumps({"documents": [], "requirement": requirement}), str(folder)))
    entities = [NewEntity("City Council", "Organization", "The elected council that sets transit fares."),
                NewEntity("Commuters Union", "Organization", "Represents daily public-transport riders."),
                NewEntity("Transit fare", "Policy", "The price of a single bus or tram ride."),
                NewEntity("Mayor Jansen", "Person", "Mayor of the city, chairs the council.")]
    council, union, fare, mayor = range(4)
    edges = [NewEdge(council, fare, "raises", "The City Council announced a 20% transit fare hike.", "2026-01-10"),
             NewEdge(union, fare, "opposes", "The Commuters Union opposes the fare hike.", "2026-01-11"),
             NewEdge(mayor, council, "chairs", "Mayor Jansen chairs the City Council.", "2025-05-01"),
             NewEdge(council, fare, "sets_price", "A single ride costs 2.00 euro.", "2024-01-01", "2026-01-10"),
             NewEdge(council, fare, "sets_price", "A single ride costs 2.40 euro after the hike.", "2026-01-10")]
    store = GraphStore(db, Embedder())
    await store.replace(sim_id, entities, edges)
    return store
