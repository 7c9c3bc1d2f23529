"""Steps 1-3 end to end against the fake endpoint (real openai client, real MiniLM), checkpoints,
resume after a crash, fallbacks to rule-based defaults, and the budget cap."""
from __future__ import annotations

import asyncio
import csv
import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from engine.config import Config
from engine.jobs import JobRunner
from engine.llm import LLMClient
from engine.sim import pipeline, records
from engine.sim.context import SimContext
from engine.sim.environment.models import CONFIG_FILE, REDDIT_PROFILES, TWITTER_PROFILES, SimulationConfig
from engine.sim.graph.store import GraphStore
from tests.fakes.openai_server import Raw
from tests.fakes.sim_responder import SimResponder
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import SAMPLE

PREPARE = pipeline.STEPS[:3]  # steps 1-3: these tests stop before the run
REQUIREMENT = "How will public opinion on the Valmora port strike evolve over the next day?"


def make_config(tmp_path, server, **llm) -> Config:
    return Config.model_validate({
        "bot": {"data_dir": str(tmp_path / "data")},
        "llm": {"base_url": server.base_url, "model": "big", "fast_model": "small", "timeout_s": 10,
                "retry_max_wait_s": 0.05, **llm},
        "simulation": {"default_agents": 8, "default_rounds": 6, "persona_batch": 3},
    })


@pytest.fixture
async def closing(db):
    """What a test opens on ``db`` (job runners, LLM clients), shut down and closed after it, before
    the database closes, pass or fail."""
    async with AsyncExitStack() as stack:
        yield stack


async def start(db, config, embedder, closing, agents=None, rounds=None):
    llm = LLMClient(config.llm, db)
    closing.push_async_callback(llm.close)
    runner = JobRunner(db)
    closing.push_async_callback(runner.shutdown)
    runner.register("simulation", pipeline.job_handler(db, config, llm, embedder, steps=PREPARE))
    sim_id, _ = await records.create(db, config, [SAMPLE], REQUIREMENT, "console:local", agents=agents, rounds=rounds)
    return llm, runner, sim_id


async def test_steps_1_to_3_end_to_end(openai_server, db, embedder, tmp_path, closing):
    responder = SimResponder()
    openai_server.responder = responder
    config = make_config(tmp_path, openai_server)
    llm, runner, sim_id = await start(db, config, embedder, closing, agents=6, rounds=4)
    job = await runner.submit("simulation", {"sim_id": sim_id}, "console:local")
    job = await runner.wait(job.id)
    assert job.state == "done", job.error
    folder = Path(job.result["folder"])

    onto = json.loads((folder / "ontology.json").read_text())
    types = [t["name"] for t in onto["entity_types"]]
    assert types[-2:] == ["Person", "Organization"] and "Policy" not in types and "LaborUnion" in types
    union = next(t for t in onto["entity_types"] if t["name"] == "LaborUnion")
    assert [a["name"] for a in union["attributes"]] == ["full_name", "members"]

    store = GraphStore(db, embedder)
    entities = await store.entities(sim_id)
    names = [e.name for e in entities]
    assert "Teresa Okafor" in names and "Okafor" not in names  # lone surname resolved to the person
    okafor = await store.entity(sim_id, "okafor")
    assert okafor is not None and okafor.name == "Teresa Okafor" and "Okafor" in okafor.aliases
    assert (await store.search(sim_id, "who leads the dockworkers union", k=3))

    cfg = SimulationConfig.model_validate_json((folder / CONFIG_FILE).read_text())
    assert len(cfg.agents) == 6 and cfg.time.rounds == 4 and cfg.time.total_hours == 4
    degrees = {e.name: e.degree for e in entities}
    chosen = [degrees[a.name] for a in cfg.agents]
    assert chosen == sorted(chosen, reverse=True) and min(chosen) >= sorted(degrees.values())[-6]
    assert all(0 <= h <= 23 for a in cfg.agents for h in a.active_hours)
    assert {a.stance for a in cfg.agents} <= {"supportive", "opposing", "neutral", "observer"}
    assert cfg.events.initial_posts and all(p.agent_id < 6 for p in cfg.events.initial_posts)
    assert all(0 < e.round < cfg.time.rounds for e in cfg.events.scheduled_events)
    with (folder / TWITTER_PROFILES).open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["username"] for r in rows] == [a.username for a in cfg.agents]
    assert all(r["description"] and r["user_char"] for r in rows)
    reddit = json.loads((folder / REDDIT_PROFILES).read_text())
    assert {"username", "bio", "persona", "age", "gender", "mbti", "country", "realname"} <= set(reddit[0])
    assert all(p["mbti"] != "XXXX" and len(p["mbti"]) == 4 for p in reddit)

    steps = await records.completed_steps(db, sim_id)
    assert list(steps) == ["ontology", "graph", "environment"]
    assert steps["ontology"]["llm_calls"] == responder.counts["ontology"] == 1
    assert steps["graph"]["llm_calls"] == responder.counts["extraction"] == steps["graph"]["summary"]["chunks"]
    assert steps["environment"]["llm_calls"] == responder.counts["personas"] + responder.counts["events"] == 3
    # extraction and personas use the fast model, the rest the main one
    models = {(json.dumps(r.get("response_format", {}))[:60], r["model"]) for r in openai_server.requests}
    assert {m for _, m in models} == {"big", "small"}


async def test_resume_after_crash_redoes_nothing(openai_server, db, embedder, tmp_path, closing):
    responder = SimResponder()
    fail_personas = {"on": True}

    def flaky(body):
        if fail_personas["on"] and "personas" in json.dumps(body.get("response_format", {})):
            return Raw(401, {"error": {"message": "bad key"}})
        return responder(body)
    openai_server.responder = flaky
    config = make_config(tmp_path, openai_server)
    llm, runner, sim_id = await start(db, config, embedder, closing)
    job = await runner.wait((await runner.submit("simulation", {"sim_id": sim_id}, "console:local")).id)
    assert job.state == "failed" and "API key" in job.error
    assert list(await records.completed_steps(db, sim_id)) == ["ontology", "graph"]
    before = dict(responder.counts)

    fail_personas["on"] = False
    await runner.resume(job.id)
    job = await runner.wait(job.id)
    assert job.state == "done", job.error
    assert responder.counts["ontology"] == before["ontology"] == 1
    assert responder.counts["extraction"] == before["extraction"]
    assert list(await records.completed_steps(db, sim_id)) == ["ontology", "graph", "environment"]


async def test_interrupted_graph_step_keeps_finished_chunks(openai_server, db, embedder, tmp_path, closing):
    responder = SimResponder()
    gate = {"stall": True}

    def slow(body):
        if gate["stall"] and responder.counts["extraction"] >= 3 and "entities" in json.dumps(body):
            return Raw(200, {}, delay=5)  # the process "dies" while these are in flight
        return responder(body)
    openai_server.responder = slow
    config = make_config(tmp_path, openai_server, max_concurrency=1)
    config.simulation.extract_concurrency = 1
    llm, runner, sim_id = await start(db, config, embedder, closing)
    job = await runner.submit("simulation", {"sim_id": sim_id}, "console:local")
    for _ in range(200):
        if responder.counts["extraction"] >= 3:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    await runner.shutdown()
    assert (await runner.get(job.id)).state == "interrupted"
    asked = responder.counts["extraction"]

    gate["stall"] = False
    runner2 = JobRunner(db)
    closing.push_async_callback(runner2.shutdown)
    runner2.register("simulation", pipeline.job_handler(db, config, llm, embedder, steps=PREPARE))
    await runner2.resume(job.id)
    job = await runner2.wait(job.id)
    assert job.state == "done", job.error
    chunks = job.result["steps"]["graph"]["chunks"]
    assert responder.counts["extraction"] == chunks  # every chunk asked exactly once overall
    assert asked >= 3 and responder.counts["ontology"] == 1


@sqlite_only
async def test_unusable_answers_fall_back_to_rules(openai_server, db, embedder, tmp_path, closing):
    responder = SimResponder()

    def garbage_for_env(body):
        text = json.dumps(body)
        if '"personas"' in text or '"hot_topics"' in text:
            responder.counts["garbage"] += 1
            return "I cannot help with that."
        return responder(body)
    openai_server.responder = garbage_for_env
    config = make_config(tmp_path, openai_server, validation_retries=0)
    llm, runner, sim_id = await start(db, config, embedder, closing, agents=4)
    job = await runner.wait((await runner.submit("simulation", {"sim_id": sim_id}, "console:local")).id)
    assert job.state == "done", job.error
    env = job.result["steps"]["environment"]
    assert env["llm_personas"] == 0 and env["events_from_llm"] is False and env["initial_posts"] >= 1
    cfg = SimulationConfig.model_validate_json((Path(job.result["folder"]) / CONFIG_FILE).read_text())
    assert len(cfg.agents) == 4 and cfg.events.narrative


async def test_budget_cap_stops_the_job_cleanly(openai_server, db, embedder, tmp_path, closing):
    openai_server.responder = SimResponder()
    config = make_config(tmp_path, openai_server, job_budget_tokens=3000)
    llm, runner, sim_id = await start(db, config, embedder, closing)
    job = await runner.wait((await runner.submit("simulation", {"sim_id": sim_id}, "console:local")).id)
    assert job.state == "failed" and "LLM budget" in job.error and "job_budget_tokens" in job.error
    spent = await llm.job_usage(job.id)
    assert 3000 <= spent.tokens < 3000 + 4 * 2000  # stopped soon after the cap (in-flight calls only)


@sqlite_only
async def test_graph_reading_api(openai_server, db, embedder, tmp_path, closing):
    openai_server.responder = SimResponder()
    config = make_config(tmp_path, openai_server)
    llm, runner, sim_id = await start(db, config, embedder, closing)
    ctx = SimContext(sim_id, config.data_dir / "sims" / sim_id, db, llm, embedder,
                     (await records.get(db, sim_id)).spec, config)
    await pipeline.run_pipeline(ctx, pipeline.STEPS[:2])
    store = ctx.graph
    facts = await store.facts(sim_id)
    assert facts and all(f.fact for f in facts)
    assert any(f.valid_at == "2026-03-03" for f in facts)
    hits = await store.search(sim_id, "Meridian Logistics automation cranes", k=5)
    assert any("Meridian" in h.text for h in hits[:3])
    assert hits[0].to_dict()["kind"] in ("entity", "fact")
    near = await store.neighbours(sim_id, "Teresa Okafor")
    assert near and all("Okafor" in (f.source + f.target) for f in near)
    chain = await store.chain(sim_id, "Teresa Okafor", "Daniel Reyes")
    assert chain and len(chain) <= 3
    summary = await store.summary(sim_id)
    assert summary["entities"] == len(await store.entities(sim_id)) and summary["facts"] == len(facts)


@sqlite_only
async def test_pipeline_on_an_endpoint_without_json_modes(openai_server, db, embedder, tmp_path, closing):
    responder = SimResponder()

    def plain_only(body):
        if "response_format" in body:
            return Raw(400, {"error": {"message": "unsupported parameter: response_format"}})
        return responder(body)
    openai_server.responder = plain_only
    config = make_config(tmp_path, openai_server)
    llm, runner, sim_id = await start(db, config, embedder, closing, agents=3, rounds=2)
    job = await runner.wait((await runner.submit("simulation", {"sim_id": sim_id}, "console:local")).id)
    assert job.state == "done", job.error
    assert job.result["steps"]["environment"]["llm_personas"] == 3
    # the mode is learnt per model: only requests already in flight meet a rejection, later ones are plain
    rejected = [r["model"] for r in openai_server.requests if "response_format" in r]
    # three formats are refused (json_schema, json_object with and without the schema field)
    assert rejected.count("big") == 3 and 3 <= rejected.count("small") <= 3 * config.simulation.extract_concurrency
    assert all("response_format" not in r for r in openai_server.requests[-2:])  # step 3: plain from the start


async def test_graph_store_validity_and_lookup(db, embedder, tmp_path, closing):
    from engine.sim.graph.store import NewEdge, NewEntity

    await db.execute("INSERT INTO simulations(id, scope, requirement, folder, created_at)"
                     " VALUES ('g1', 'console:local', 'q', ?, '2026-01-01')", (str(tmp_path),))
    store = GraphStore(db, embedder)
    people = [NewEntity("Ana Kovac", "Politician", "Regional transport minister.", aliases=["Minister Kovac"]),
              NewEntity("Teresa Okafor", "Person", "Leads the dockworkers union."),
              NewEntity("Daniel Reyes", "Person", "Chief executive of Meridian Logistics.")]
    edges = [NewEdge(0, 1, "MEETS", "Kovac met Okafor on 10 March.", "2026-03-10"),
             NewEdge(1, 2, "OPPOSES", "Okafor opposed Reyes's automation plan.", "2026-03-02", "2026-03-31"),
             NewEdge(1, 2, "NEGOTIATES_WITH", "Okafor negotiates with Reyes.", "2026-03-31")]
    await store.replace("g1", people, edges)
    assert len(await store.facts("g1")) == 3
    valid = await store.facts("g1", include_invalid=False)
    assert [f.relation for f in valid] == ["MEETS", "NEGOTIATES_WITH"]
    assert (await store.entity("g1", "minister kovac")).name == "Ana Kovac"  # alias, normalised
    assert [f.relation for f in await store.chain("g1", "Ana Kovac", "Daniel Reyes")] in (
        ["MEETS", "OPPOSES"], ["MEETS", "NEGOTIATES_WITH"])
    assert len(await store.neighbours("g1", "Ana Kovac", depth=1)) == 1
    assert len(await store.neighbours("g1", "Ana Kovac", depth=2)) == 3
    assert (await store.entities("g1"))[0].name == "Teresa Okafor"  # most connected first
    await store.replace("g1", people[:1], [])  # replacing is idempotent, not additive
    assert len(await store.entities("g1")) == 1 and await store.facts("g1") == []


def test_a_simulation_writes_in_its_requirements_language_else_its_documents():
    from engine.jobs import JobError
    from engine.sim.context import spec_language
    english_doc = SAMPLE.read_text()
    thai_doc = "การประท้วงของคนงานท่าเรือเริ่มขึ้นเมื่อวานนี้\n\nสหภาพแรงงานเรียกร้องค่าจ้างที่สูงขึ้น"
    assert spec_language(PORTUGUESE, [english_doc]) == "pt-BR"
    assert spec_language(REQUIREMENT, [thai_doc]) == "th"          # an English requirement: the documents'
    assert spec_language(REQUIREMENT, [english_doc]) == "en"
    assert spec_language("Greve?", []) == "en"                      # nothing to tell from
    assert spec_language(PORTUGUESE, [english_doc], "th") == "th"    # --lang decides
    assert spec_language(REQUIREMENT, [], "pt_br") == "pt-BR"
    with pytest.raises(JobError, match="not a language code"):
        spec_language(REQUIREMENT, [], "klingon")


PORTUGUESE = "Como a opinião pública sobre a greve no porto de Valmora vai evoluir no próximo dia?"


async def test_a_portuguese_requirement_asks_every_step_in_portuguese(openai_server, db, embedder, tmp_path,
                                                                     closing):
    from engine.sim.context import spec_language
    from engine.sim.run.schedule import language_note
    responder = SimResponder()
    openai_server.responder = responder
    config = make_config(tmp_path, openai_server)
    llm = LLMClient(config.llm, db)
    closing.push_async_callback(llm.close)
    runner = JobRunner(db)
    closing.push_async_callback(runner.shutdown)
    runner.register("simulation", pipeline.job_handler(db, config, llm, embedder, steps=PREPARE))
    sim_id, spec = await records.create(db, config, [SAMPLE], PORTUGUESE, "console:local", agents=4, rounds=2,
                                        language=spec_language(PORTUGUESE, [SAMPLE.read_text()]))
    assert spec.language == "pt-BR" and (await records.get(db, sim_id)).spec.language == "pt-BR"
    job = await runner.wait((await runner.submit("simulation", {"sim_id": sim_id}, "console:local")).id)
    assert job.state == "done", job.error
    systems = [r["messages"][0]["content"] for r in openai_server.requests]
    assert len(systems) == sum(responder.counts.values())
    # every request of steps 1-3 (ontology, each chunk, each persona batch, the event plan) names it
    assert all("Brazilian Portuguese" in s for s in systems), [s[-200:] for s in systems]
    cfg = SimulationConfig.model_validate_json((Path(job.result["folder"]) / CONFIG_FILE).read_text())
    assert cfg.language == "pt-BR"   # the run's agents are told (in their profiles) to write in it
    assert language_note(cfg) == " Write every post, comment and answer in Brazilian Portuguese."
