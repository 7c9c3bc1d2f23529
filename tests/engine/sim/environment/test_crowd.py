"""The crowd: --agents N honoured when the documents name fewer actors. Steps 1-3 against the fake
endpoint (real openai client, real MiniLM): the named actors first, then members of the public
drawn from the ontology's kinds of ordinary people, with varied personas from the LLM or, when its
answers are unusable, from the rules; they follow and are followed in the seeded graph."""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from engine.config import Config
from engine.jobs import JobRunner
from engine.llm import LLMClient
from engine.sim import pipeline, records
from engine.sim.environment.crowd import group_label, public_groups
from engine.sim.environment.models import CONFIG_FILE, TWITTER_PROFILES, SimulationConfig
from engine.sim.ontology import Ontology, normalise
from engine.sim.run.schedule import follow_edges
from tests.fakes.sim_responder import SimResponder, kind_of
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import SAMPLE

REQUIREMENT = "How will Valmora react to the automation of its port?"


async def prepare(db, tmp_path, server, embedder, agents: int) -> tuple[dict, SimulationConfig, Path]:
    """Steps 1-3 of a simulation of SAMPLE asked for ``agents`` agents: the environment step's
    summary, the config it wrote and the folder."""
    config = Config.model_validate({
        "bot": {"data_dir": str(tmp_path / "data")},
        "llm": {"base_url": server.base_url, "model": "big", "timeout_s": 10, "retry_max_wait_s": 0.05,
                "validation_retries": 1},
        "simulation": {"persona_batch": 6, "max_agents": 200, "seed": 5}})
    llm = LLMClient(config.llm, db)
    runner = JobRunner(db)
    runner.register("simulation", pipeline.job_handler(db, config, llm, embedder, steps=pipeline.STEPS[:3]))
    try:
        sim_id, _ = await records.create(db, config, [SAMPLE], REQUIREMENT, "console:local", agents=agents, rounds=4)
        job = await runner.wait((await runner.submit("simulation", {"sim_id": sim_id}, "console:local")).id)
        assert job is not None and job.state == "done", job.error if job else None
    finally:
        await runner.shutdown()
        await llm.close()
    assert job.result is not None
    folder = Path(job.result["folder"])
    cfg = SimulationConfig.model_validate_json((folder / CONFIG_FILE).read_text())
    return job.result["steps"]["environment"], cfg, folder


@sqlite_only
async def test_the_public_makes_up_the_agents_the_documents_do_not_name(openai_server, db, embedder, tmp_path):
    responder = SimResponder()
    openai_server.responder = responder
    summary, cfg, folder = await prepare(db, tmp_path, openai_server, embedder, agents=40)
    named, drawn = summary["named"], summary["drawn"]
    assert summary["agents"] == len(cfg.agents) == 40 and named + drawn == 40 and 5 < named < 40
    public = cfg.agents[named:]
    assert all(a.entity_id == "" and a.entity_type in ("Resident", "DockWorker") for a in public)
    assert all(a.entity_id for a in cfg.agents[:named])                       # the named actors come first
    groups = Counter(a.entity_type for a in public)
    assert set(groups) == {"Resident", "DockWorker"}                           # every group drawn
    assert summary["drawn from"] == ", ".join(f"{group_label(g)} {n}" for g, n in groups.most_common())
    assert responder.counts["crowd"] == -(-drawn // 6)                         # batched like the personas
    # varied: names, stances, activity; the public less influential than the named actors
    assert len({a.name for a in cfg.agents}) == 40 and len({a.username for a in cfg.agents}) == 40
    assert len({a.stance for a in public}) >= 3 and len({a.activity_level for a in public}) >= 4
    assert max(a.influence for a in public) <= 1.0 <= min(a.influence for a in cfg.agents[:named])
    personas = json.loads((folder / "personas.json").read_text())
    assert len(personas) == 40 and all(p["from_llm"] for p in personas[named:])
    with open(folder / TWITTER_PROFILES, newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 40
    # the seeded follow graph covers them: each follows someone, and they are followed
    edges = follow_edges(cfg, "twitter", 0.2)
    ids = {a.agent_id for a in public}
    assert ids <= {f for f, _ in edges}
    assert len(ids & {t for _, t in edges}) >= len(ids) // 2


@sqlite_only
async def test_rule_based_members_still_vary_when_the_llm_fails(openai_server, db, embedder, tmp_path):
    base = SimResponder()

    def junk_crowd(body):
        return json.dumps({"people": [{"entity_name": "N/A"}]}) if kind_of(body) == "crowd" else base(body)

    openai_server.responder = junk_crowd
    summary, cfg, folder = await prepare(db, tmp_path, openai_server, embedder, agents=36)
    named = summary["named"]
    public = cfg.agents[named:]
    personas = json.loads((folder / "personas.json").read_text())[named:]
    assert summary["drawn"] == len(public) >= 10 and not any(p["from_llm"] for p in personas)
    assert len({a.name for a in cfg.agents}) == len(cfg.agents)
    assert len({a.stance for a in public}) >= 3 and len({a.activity_level for a in public}) >= 5
    assert len({tuple(a.active_hours) for a in public}) >= 3 and len({a.response_delay_rounds for a in public}) >= 2
    assert all("Valmora" in p["bio"] and p["profession"] in ("resident", "dock worker") for p in personas)
    assert len({p["persona"].split(", ", 1)[1] for p in personas}) >= 4      # temperaments differ


def test_public_groups_are_the_kinds_of_ordinary_people():
    onto = normalise(Ontology.model_validate({"entity_types": [
        {"name": "College Student"}, {"name": "Politician"}, {"name": "Bus Company"}, {"name": "Commuter"},
        {"name": "City Official"}], "relation_types": []}))
    assert public_groups(onto) == ["CollegeStudent", "Commuter"]
    assert [group_label(g) for g in public_groups(onto)] == ["college student", "commuter"]
    only_officials = normalise(Ontology.model_validate({"entity_types": [{"name": "Mayor"}], "relation_types": []}))
    assert public_groups(only_officials) == ["Person"] and group_label("Person") == "member of the public"


@pytest.mark.parametrize("agents", [5])
@sqlite_only
async def test_no_one_is_drawn_when_the_documents_name_enough(openai_server, db, embedder, tmp_path, agents):
    responder = SimResponder()
    openai_server.responder = responder
    summary, cfg, _ = await prepare(db, tmp_path, openai_server, embedder, agents=agents)
    assert (summary["named"], summary["drawn"], len(cfg.agents)) == (agents, 0, agents)
    assert "drawn from" not in summary and responder.counts["crowd"] == 0
