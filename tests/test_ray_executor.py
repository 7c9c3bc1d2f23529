"""Simulation runs on a Ray cluster: a local cluster of a head and two worker nodes on this
machine (ray.cluster_utils.Cluster). A run is placed on a worker node, that node is killed
mid-run, and the run resumes on the other node from its last completed round: every action
before it kept, none twice. The real child process, camel-oasis and the openai client run
against the fake LLM server."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from engine.jobs import JobRunner
from engine.sim.run.protocol import ACTIONS_LOG, PLATFORMS, platform_db
from engine.sim.run.ray_executor import RayExecutor
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.llm_fixtures import db  # noqa: F401
from tests.sim_fixture import make_sim_folder


pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def cluster():
    """A head that runs no simulations and two worker nodes that each can run one."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes = [c.add_node(num_cpus=1, resources={"sim": 1}) for _ in range(2)]
    c.wait_for_nodes()
    yield c, nodes
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI(SocialResponder(delay=0.3)) as server:
        yield server


def log_events(folder: Path, platform: str) -> list[dict]:
    return [json.loads(line) for line in (folder / platform / ACTIONS_LOG).read_text().splitlines()]


async def until(predicate, timeout: float = 180.0):
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.2)


async def test_a_run_whose_node_dies_resumes_on_the_other_node_with_every_action_once(tmp_path, db, llm, cluster):
    c, nodes = cluster
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=4, rounds=5, sim_id="r1")
    executor = RayExecutor(c.address, namespace="test", num_cpus=1, resources={"sim": 1})
    runs = SimRuns(db, executor, LLMTarget(llm.base_url, "fake-model"),
                   RunSettings(idle_s=0.5, progress_interval_s=0.2, lost_restarts=1))
    jobs = JobRunner(db, max_concurrent=1)
    jobs.register("sim_run", runs.job)
    job = await jobs.submit("sim_run", {"sim_id": "r1", "folder": str(folder)}, scope="console:local")

    async def two_rounds_done() -> bool:
        state = await runs.get("r1")
        return bool(state and state.rounds_done and min(state.rounds_done.values()) >= 2)
    await until(two_rounds_done)
    first = executor._started["r1"]
    victim = next(n for n in nodes if n.node_id == first.node)
    await asyncio.to_thread(c.remove_node, victim, False)   # the node dies, its processes with it

    finished = await asyncio.wait_for(jobs.wait(job.id), 300)
    assert finished.state == "done", finished.error
    second = executor._started["r1"]
    assert second is not first and second.node != first.node  # resumed on the surviving node
    state = await runs.get("r1")
    assert state.rounds_done == {p: 5 for p in PLATFORMS}
    assert "twitter resumed at round" in state.restart_reason
    for platform in PLATFORMS:
        events = log_events(folder, platform)
        # every round once, in order: the round the node's death cut short is not logged twice
        assert [e["round"] for e in events if e["type"] == "round_end"] == list(range(5))
        posts_logged = sum(1 for e in events if e["type"] == "action" and e["action"] == "create_post")
        with sqlite3.connect(platform_db(folder, platform)) as conn:
            posts_stored = conn.execute("SELECT count(*) FROM post WHERE original_post_id IS NULL").fetchone()[0]
        assert posts_logged == posts_stored
    await executor.close()
    await runs.close()
