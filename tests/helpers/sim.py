"""Simulation set-up for tests: ``SAMPLE``, the news item the simulation tests submit;
``make_sim_folder``, a small prepared simulation folder built straight from the environment models;
``console_bot``, a started bot with the simulation features and a console (``console_session``, the
same for the length of a block); ``sim_app``, an app with the simulation features on the fake LLM;
``jobs_for``, a job runner for runs; ``log_events``, the rows of a run's actions.jsonl (a broken
line fails)."""
from __future__ import annotations

import contextlib
import csv
import json
from pathlib import Path
from typing import AsyncIterator

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from engine.jobs import JobRunner
from engine.sim import pipeline
from engine.sim.environment.models import (
    CONFIG_FILE,
    REDDIT_PROFILES,
    TWITTER_PROFILES,
    AgentConfig,
    EventConfig,
    InitialPost,
    ScheduledEvent,
    SimulationConfig,
    TimeConfig,
)
from engine.sim.run.output import ACTIONS_LOG
from engine.sim.run.service import SimRuns
from tests.helpers.chat import make_app
from tests.helpers.config import write_config

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "harbour_strike.md"

SIM_FEATURES = ["bot.features.core", "bot.features.simulation"]

NAMES = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana"]


def make_sim_folder(folder: Path, agents: int = 6, rounds: int = 3, sim_id: str = "s1",
                    everyone_everywhere: bool = False) -> SimulationConfig:
    """Everyone is active in every round, once; but agent 3 twice, agents 0 and 4 are on Twitter
    only and agent 1 posts an event on Reddit in round 1, unless ``everyone_everywhere`` (all
    agents on both platforms once a round, the initial post only)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [NAMES[i] if i < len(NAMES) else f"Agent{i}" for i in range(agents)]
    cfg = SimulationConfig(
        sim_id=sim_id, requirement="How will the town react to the new bridge toll?",
        time=TimeConfig(total_hours=rounds, minutes_per_round=60, rounds=rounds, start_hour=9),
        agents=[AgentConfig(agent_id=i, name=names[i], username=names[i].lower(), entity_type="Person",
                            activity_level=1.0, active_hours=list(range(24)),
                            posts_per_hour=2.0 if i == 3 and not everyone_everywhere else 1.0,
                            influence=1.0 + i % 3, stance=("supportive", "opposing", "neutral")[i % 3],
                            platforms=["twitter", "reddit"] if i % 4 or everyone_everywhere else ["twitter"])
                for i in range(agents)],
        events=EventConfig(hot_topics=["bridge toll"], narrative="The council announced a toll.",
                           initial_posts=[InitialPost(agent_id=0, content="The toll starts Monday.", round=0)],
                           scheduled_events=[] if everyone_everywhere else [
                               ScheduledEvent(round=1, agent_id=1, platform="reddit",
                                              content="BREAKING: council delays the toll")]),
        seed=7)
    (folder / CONFIG_FILE).write_text(cfg.model_dump_json(indent=1), encoding="utf-8")
    with open(folder / TWITTER_PROFILES, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["username", "description", "user_char"])
        w.writeheader()
        for a in cfg.agents:
            w.writerow({"username": a.username, "description": f"{a.name}, a local",
                        "user_char": f"{a.name} lives in town and commutes over the bridge."})
    reddit = [{"username": a.username, "bio": f"{a.name}, a local", "persona": f"{a.name} reads the local news.",
               "age": 30 + a.agent_id, "gender": "female" if a.agent_id % 2 else "male", "mbti": "INTJ",
               "country": "UK"} for a in cfg.agents]
    (folder / REDDIT_PROFILES).write_text(json.dumps(reddit), encoding="utf-8")
    return cfg


async def console_bot(tmp_path, llm: str | dict, *, steps: int | None = 4, features: list[str] = SIM_FEATURES,
                      **simulation) -> tuple[App, Console]:
    """A started bot with ``features`` and a console, progress shown at every event: ``llm`` is its
    [llm] table (tests.helpers.config.llm) or the fake endpoint's URL alone, ``simulation`` its
    [simulation] keys; its simulation jobs run the pipeline's first ``steps`` steps (by default up to
    the run: the report has tests of its own), all of them when None."""
    path = write_config(tmp_path, {"llm": {"base_url": llm} if isinstance(llm, str) else llm,
                                   "jobs": {"progress_interval_s": 0.0}, "simulation": simulation})
    app = await App.create(load_config(path), features)
    if steps is not None:
        app.sims.steps = pipeline.STEPS[:steps]
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    return app, console


@contextlib.asynccontextmanager
async def console_session(tmp_path, llm: str | dict, **options) -> AsyncIterator[tuple[App, Console]]:
    """``console_bot`` (same arguments) for the length of a block, closed at its end."""
    app, console = await console_bot(tmp_path, llm, **options)
    try:
        yield app, console
    finally:
        await app.close()


async def sim_app(tmp_path: Path, server, db_url: str | None = None, **sections) -> App:
    """An app with the simulation features (no memory) on the fake LLM ``server`` (model "m", retries
    within a second; more [llm] keys in ``sections["llm"]``), not started."""
    llm = {"base_url": server.base_url, "model": "m", "retry_max_wait_s": 1, **sections.pop("llm", {})}
    return await make_app(tmp_path, db_url, SIM_FEATURES, llm=llm, **sections)


def jobs_for(db, runs: SimRuns) -> JobRunner:
    jobs = JobRunner(db, max_concurrent=2)
    jobs.register("sim_run", runs.job)
    return jobs


def log_events(folder: Path, platform: str) -> list[dict]:
    return [json.loads(line) for line in (folder / platform / ACTIONS_LOG).read_text().splitlines()]
