"""Simulation runs on a Ray cluster: a local cluster of a head and two worker nodes on this
machine (ray.cluster_utils.Cluster). A run is placed on a worker node, that node is killed
mid-run, and the run resumes on the other node from its last completed round: every action
before it kept, none twice. The real child process, camel-oasis and the openai client run
against the fake LLM server. The LLM key, set in the nodes' environment as a deployment does,
reaches the endpoint and no file of Ray's session or of the run. An ensemble's step 4
(engine.sim.ensemble.run) on the same cluster runs each of its runs as an actor of its own, the
runs in flight together, and its summary counts every run."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from engine.config import parse_config
from engine.jobs import JobRunner
from engine.sim import records
from engine.sim.context import SimContext
from engine.sim.ensemble.run import parallel_runs, run_all
from engine.sim.run.output import ACTIONS_LOG, PLATFORMS, platform_db
from engine.sim.run.ray_executor import RayExecutor
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.helpers.llm_fixtures import db  # noqa: F401
from tests.helpers.sim import make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(420)
KEY_ENV, KEY = "WORLDBOT_RAY_TEST_KEY", "sk-ray-test-4f1c9e27d3b8a605"


@pytest.fixture(scope="module")
def cluster():
    """A head that runs no simulations and two worker nodes that each can run one, all started
    with the LLM key in their environment."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, KEY)
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        nodes = [c.add_node(num_cpus=1, resources={"sim": 1}) for _ in range(2)]
        c.wait_for_nodes()
        yield c, nodes
        ray.shutdown()
        c.shutdown()


def files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI(SocialResponder(delay=0.3)) as server:
        yield server


def log_events(folder: Path, platform: str) -> list[dict]:
    return [json.loads(line) for line in (folder / platform / ACTIONS_LOG).read_text().splitlines()]


async def test_a_run_whose_node_dies_resumes_on_the_other_node_with_every_action_once(tmp_path, db, llm, cluster):
    c, nodes = cluster
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=4, rounds=5, sim_id="r1")
    executor = RayExecutor(c.address, namespace="test", num_cpus=1, resources={"sim": 1})
    runs = SimRuns(db, executor, LLMTarget(llm.base_url, "fake-model", api_key_env=KEY_ENV),
                   RunSettings(idle_s=0.5, progress_interval_s=0.2, lost_restarts=1))
    jobs = JobRunner(db, max_concurrent=1)
    jobs.register("sim_run", runs.job)
    job = await jobs.submit("sim_run", {"sim_id": "r1", "folder": str(folder)}, scope="console:local")

    async def two_rounds_done() -> bool:
        state = await runs.get("r1")
        return bool(state and state.rounds_done and min(state.rounds_done.values()) >= 2)
    await until(two_rounds_done, 180)
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
    assert f"Bearer {KEY}" in llm.authorizations                      # the run used the nodes' key
    assert files_holding(Path(c.head_node.get_session_dir_path()), KEY) == []   # Ray's logs never hold it
    assert files_holding(folder, KEY) == []                                     # nor the run's files
    await executor.close()
    await runs.close()


async def test_an_ensemble_runs_each_run_as_its_own_actor_all_at_once(tmp_path, db, llm, cluster):
    c, _ = cluster
    while len(c.worker_nodes) < 2:   # a node the test above killed is replaced: one run per node
        c.add_node(num_cpus=1, resources={"sim": 1})   # in the main thread: Ray sets a signal handler
    c.wait_for_nodes()
    config = parse_config({"bot": {"data_dir": str(tmp_path / "data")}, "simulation": {"executor": "ray"}},
                          str(tmp_path / "config.toml"))
    assert parallel_runs(config, 2) == 2        # on Ray, with parallel_runs unset: every run at once
    head, spec = await records.create(db, config, [], "How will the town react to the new bridge toll?",
                                      "console:local", runs=2, folder=tmp_path / "sim")
    make_sim_folder(tmp_path / "sim", agents=2, rounds=2, sim_id=head)
    executor = RayExecutor(c.address, namespace="test", num_cpus=1, resources={"sim": 1})
    runs = SimRuns(db, executor, LLMTarget(llm.base_url, "fake-model", api_key_env=KEY_ENV),
                   RunSettings(idle_s=0.5, progress_interval_s=0.2))
    ctx = SimContext(head, tmp_path / "sim", db, None, None, spec, config, job_id="j1", scope="console:local",
                     runs=runs)
    step = asyncio.create_task(run_all(ctx, 2))
    ids = [f"{head}-r1", f"{head}-r2"]

    def both_in_flight() -> bool:
        if step.done():
            step.result()   # the step ended first: its error fails the test here
        started = [executor._started.get(i) for i in ids]
        return all(r is not None and r.alive for r in started)
    await until(both_in_flight, 180, "both runs in flight at once")
    summary = await asyncio.wait_for(step, 300)

    hosts = [executor._started[i] for i in ids]
    assert len({h.actor._actor_id for h in hosts}) == 2          # an actor of its own for each run
    assert len({h.pid for h in hosts}) == 2 and all(h.pid for h in hosts)
    assert len({h.node for h in hosts}) == 2                     # each worker node had room for one
    # after the last round a run idles for interviews (idle_s), then its child exits cleanly
    await until(lambda: not any(h.alive for h in hosts), 60, "both runs' children to exit")
    assert [h.returncode for h in hosts] == [0, 0]
    recorded = [(await records.completed_steps(db, i))["run"]["summary"] for i in ids]
    assert all(r["rounds"] == 2 and r["actions"] > 0 for r in recorded)
    assert summary["runs"] == 2 and summary["rounds"] == 2
    assert summary["actions"] == sum(r["actions"] for r in recorded)
    assert sorted(summary["actions per run"].split()) == sorted(str(r["actions"]) for r in recorded)
    for i in ids:
        state = await runs.get(i)
        assert state.rounds_done == {p: 2 for p in PLATFORMS}
    await executor.close()
    await runs.close()
