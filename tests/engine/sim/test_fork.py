"""Forking a simulation at a round (/sim fork, `python -m bot simulate --fork`): the real child
process, camel-oasis and the openai client against the fake server. One parent run serves every
check: a fork taken while it runs and run to its end, refusals in chat and on the command line."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from engine.db import Database
from engine.jobs import JobError
from engine.sim import pipeline
from engine.sim.fork import fork_simulation
from engine.sim.run import fork_points
from engine.sim.run.output import ACTIONS_LOG, CHECKPOINT, CHECKPOINT_DB, MEMORY_FILE, platform_db
from tests.conftest import REPO
from tests.fakes.openai_server import SocialResponder
from tests.helpers.llm_fixtures import fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(420)
FEATURES = ["bot.features.core", "bot.features.simulation"]
PLATFORMS = ("twitter", "reddit")


def log_lines(folder: Path, platform: str) -> list[str]:
    return (folder / platform / ACTIONS_LOG).read_text(encoding="utf-8").splitlines()


def posts(db: Path, upto: int | None = None) -> list[tuple]:
    """Who posted what when (not the like counts, which later rounds change)."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT post_id, user_id, original_post_id, content, quote_content, created_at FROM post"
                            " WHERE post_id <= ? ORDER BY post_id", (upto or 1 << 30,)).fetchall()


async def add_parent(db: Database, folder: Path) -> None:
    """Simulation c1 with steps 1-3 done (a prepared folder and a two-entity graph)."""
    make_sim_folder(folder, agents=5, rounds=4, sim_id="c1")
    await db.execute(
        "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
        " VALUES ('c1', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
        (json.dumps({"documents": [], "requirement": "toll?", "agents": 5, "rounds": 4}), str(folder)))
    for step in ("ontology", "graph", "environment"):
        await db.execute("INSERT INTO sim_steps(sim_id, step, summary, llm_calls, tokens, finished_at)"
                         " VALUES ('c1', ?, '{\"entities\": 2}', 7, 700, 'x')", (step,))
    for name in ("Council", "Toll"):
        await db.execute("INSERT INTO sim_entities(sim_id, name, norm_name, type) VALUES ('c1', ?, ?, 'Thing')",
                         (name, name.lower()))
    await db.execute(
        "INSERT INTO sim_edges(sim_id, source_id, target_id, relation, fact) SELECT 'c1', a.id, b.id, 'SETS',"
        " 'The council sets the toll.' FROM sim_entities a, sim_entities b WHERE a.name='Council' AND b.name='Toll'")


# SQLite only (58 s a backend): the fork's row copies run on both in test_a_fork_copies_the_graph_...
@sqlite_only
async def test_fork_of_a_running_simulation_and_refusals(openai_server, tmp_path, capsys, db_url):
    responder = openai_server.responder = SocialResponder(delay=0.25)  # slow enough to fork mid-run
    config = tmp_path / "config.toml"
    config.write_text(f'[bot]\ndata_dir = "data"\n[database]\nurl = "{db_url}"\n'
                      f'[llm]\nbase_url = "{openai_server.base_url}"\n'
                      f'[jobs]\nprogress_interval_s = 0.0\n[simulation]\nrun_idle_s = 0.5\n'
                      # the fork's LLM calls are counted exactly against its agent steps below;
                      # stance tracking (more calls per round) has tests of its own
                      f'track_stances = false\n')
    app = await App.create(load_config(config), FEATURES)
    app.sims.steps = pipeline.STEPS[:4]  # the jobs end with the run (the report has tests of its own)
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    runs = app.sims.runs
    parent = tmp_path / "sim"
    try:
        await add_parent(app.db, parent)
        await console.handle_line("/sim fork c1 --from-round 1")
        assert "simulation c1 has no run yet" in capsys.readouterr().out
        job = await app.jobs.submit("simulation", {"sim_id": "c1"}, "console:local", channel="console")

        async def parent_at(k: int) -> bool:
            state = await runs.get("c1")
            return bool(state and state.rounds_done and min(state.rounds_done.values()) >= k)
        await until(lambda: parent_at(2), 240)
        assert (await runs.get("c1")).status == "running"
        # 1. a fork of the running parent, after round 2, with an event at round 3
        await console.handle_line('/sim fork c1 --from-round 2 --inject "The council scraps the toll" --rounds 4')
        out = capsys.readouterr().out
        assert "forked from `c1` after round 2" in out and "runs rounds 3-4" in out, out
        fork = await app.db.fetchone("SELECT * FROM simulations WHERE parent_id='c1'")
        assert (fork["fork_round"], fork["fork_event"]) == (2, "The council scraps the toll")
        assert json.loads(fork["spec"])["rounds"] == 4
        assert (await runs.get("c1")).status == "running", "the parent ran on while it was forked"
        child = Path(fork["folder"])
        injections = json.loads((child / "injections.json").read_text())
        assert [(e["round"], e["platforms"], e["source"], e["text"]) for e in injections] == [
            (3, ["twitter", "reddit"], "News Desk", "The council scraps the toll")]

        done = await app.jobs.wait(job.id)
        assert done.state == "done", done.error
        forked = await app.jobs.wait(fork["job_id"])
        assert forked.state == "done", forked.error

        # steps 1-3 were shared (no LLM call) and so was the graph; the fork ran on to its own end
        steps = await app.db.fetchall("SELECT step, llm_calls FROM sim_steps WHERE sim_id=? ORDER BY rowid",
                                      (fork["id"],))
        assert [(s["step"], s["llm_calls"]) for s in steps][:3] == [("ontology", 0), ("graph", 0), ("environment", 0)]
        facts = await app.db.fetchall(
            "SELECT a.name AS a, b.name AS b FROM sim_edges e JOIN sim_entities a ON a.id = e.source_id"
            " JOIN sim_entities b ON b.id = e.target_id WHERE e.sim_id=? AND a.sim_id=? AND b.sim_id=?",
            (fork["id"],) * 3)
        assert [(f["a"], f["b"]) for f in facts] == [("Council", "Toll")]
        new_steps = 0
        for platform in PLATFORMS:
            mine, theirs = log_lines(child, platform), log_lines(parent, platform)
            events = [json.loads(x) for x in mine]
            ends = [i for i, e in enumerate(events) if e["type"] == "round_end"]
            assert [events[i]["round"] for i in ends] == [0, 1, 2, 3]
            assert events[-1]["type"] == "simulation_end" and events[-1]["rounds_done"] == 4
            cut = ends[1] + 1  # rounds 1-2 (0 and 1 in the log) are the parent's, line for line
            assert mine[:cut] == theirs[:cut] and mine[cut:] != theirs[cut:]
            new_steps += sum(events[i]["llm_steps"] for i in ends[2:])
            # the fork's event went out at its first round (round 3; 2 in the log), by the news account
            assert [(e["round"], e["source"]) for e in events if e["type"] == "injected"] == [(2, "News Desk")]
            at_k = posts(fork_points.point_dir(parent, platform, 2) / f"{platform}.db")
            assert at_k and posts(platform_db(child, platform), at_k[-1][0]) == at_k
            assert posts(platform_db(parent, platform), at_k[-1][0]) == at_k
            assert len(posts(platform_db(child, platform))) > len(at_k)
            # fork points: every round of the parent, the fork's own rounds and the shared ones
            assert fork_points.available(parent, platform) == [1, 2, 3, 4]
            assert fork_points.available(child, platform) == [1, 2, 3, 4]
            point = fork_points.read_point(parent, platform, 3)
            text = (parent / platform / ACTIONS_LOG).read_bytes()[:point["bytes"]].decode()
            assert json.loads(text.splitlines()[-1])["type"] == "round_end" and '"round": 2,' in text.splitlines()[-1]
        # its LLM calls are the agent steps of rounds 3-4 only: nothing for steps 1-3 or rounds 1-2
        assert forked.result["llm_calls"] == new_steps > 0

        await console.handle_line("/sims")
        assert f"`{fork['id']}` ⑂ of `c1` at round 2 · +event: The council scraps the toll done" in \
            capsys.readouterr().out
        await console.handle_line(f"/sim status {fork['id']}")
        status = capsys.readouterr().out
        assert "⑂ of `c1` at round 2" in status and "1. ontology: done · 0 LLM calls" in status
        assert "can be forked after rounds 1-4" in status

        # 2. refusals, one line each
        for line, says in (("/sim fork c1 --from-round 9", "round 9 is not a completed round of simulation c1: "
                                                          "fork from round 1 to 4."),
                           ("/sim fork c1 --from-round 4", "the fork must run past round 4: give --rounds above 4"),
                           ("/sim fork c1", "say which round to fork from")):
            await console.handle_line(line)
            out = capsys.readouterr().out
            assert says in out and out.strip().count("\n") == 0, (line, out)
        shutil.rmtree(fork_points.point_dir(parent, "twitter", 2))  # as if the disk budget had thinned it out
        await console.handle_line("/sim fork c1 --from-round 2")
        out = capsys.readouterr().out
        assert "round 2 of simulation c1 can no longer be forked from" in out and "rounds that can: 1, 3-4." in out
        # 3. the finished parent: its state after round 3, ready to resume (not run here: the fork
        # above ran from such a state); without fork points, its last round from the checkpoint
        made = await app.sims.fork("c1", 3, inject="Fog closes the bridge", asked_by="ada")
        state = await runs.get(made.sim_id)
        assert (state.status, state.rounds_done, state.rounds_total) == ("stopped", {"twitter": 3, "reddit": 3}, 4)
        for platform in PLATFORMS:
            point = fork_points.point_dir(parent, platform, 3)
            mine = Path(made.folder) / platform
            assert (mine / "checkpoint.db").read_bytes() == (point / f"{platform}.db").read_bytes() == \
                (mine / f"{platform}.db").read_bytes()
            assert (mine / "memory.json").read_text() == (point / "memory.json").read_text()
            assert json.loads((mine / "checkpoint.json").read_text())["rounds_done"] == 3
            assert (mine / ACTIONS_LOG).read_bytes() == (parent / platform / ACTIONS_LOG).read_bytes()[
                :fork_points.read_point(parent, platform, 3)["bytes"]]
            assert state.actions[platform] == fork_points.read_point(parent, platform, 3)["actions"]
            fork_points.clear(parent, platform)   # as with fork_points_mb = 0
        assert await app.sims.fork_rounds("c1") == [4]
        last = await app.sims.fork("c1", 4, rounds=6)
        assert (await runs.get(last.sim_id)).rounds_done == {"twitter": 4, "reddit": 4}
        refused = r"round 3 of simulation c1 can no longer be forked from .*rounds that can: 4\."
        with pytest.raises(JobError, match=refused):
            await app.sims.fork("c1", 3)

        # 4. the command line refuses in one line, before anything is made
        count = await app.db.fetchval("SELECT count(*) FROM simulations")
        for argv, says in ((["--fork", "c1", "--from-round", "7"],
                            "error: round 7 is not a completed round of simulation c1: fork from round 1 to 4."),
                           (["--fork", "c1"], "error: --fork needs --from-round K (the completed round the fork "
                                              "starts after)")):
            cli = subprocess.run([sys.executable, "-m", "bot", "--config", str(config), "simulate", *argv], cwd=REPO,
                                 capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
            assert cli.returncode == 2 and cli.stderr.strip().splitlines()[-1] == says, cli.stderr[-2000:]
        assert await app.db.fetchval("SELECT count(*) FROM simulations") == count
        assert not responder.rejected
    finally:
        await app.close()


async def test_a_fork_copies_the_graph_and_later_graphs_get_new_ids(config, db, tmp_path):
    """On both backends: the fork's graph rows are the parent's under new ids (edges remapped),
    a fork of the same round again gets ids of its own, and rows written after the forks (by
    the graph step of another simulation) do not collide with the copied ids."""
    parent = tmp_path / "sim"
    await add_parent(db, parent)
    for platform in PLATFORMS:   # a stopped run after round 2, resumable from its checkpoint
        pdir = parent / platform
        pdir.mkdir()
        (pdir / CHECKPOINT).write_text(json.dumps({"rounds_done": 2, "trace_rowid": 5}))
        (pdir / CHECKPOINT_DB).write_bytes(b"state after round 2")
        (pdir / MEMORY_FILE).write_text("{}")
        (pdir / ACTIONS_LOG).write_text('{"type": "round_end", "round": 0}\n{"type": "round_end", "round": 1}\n')
    await db.execute("INSERT INTO sim_runs(sim_id, folder, status, rounds_total, rounds_done, actions, started_at,"
                     " updated_at) VALUES ('c1', ?, 'stopped', 4, ?, ?, 'x', 'x')",
                     (str(parent), json.dumps(dict.fromkeys(PLATFORMS, 2)), json.dumps(dict.fromkeys(PLATFORMS, 7))))

    def facts_sql(sim_id: str):
        return ("SELECT a.name AS a, b.name AS b, a.sim_id AS sa, b.sim_id AS sb FROM sim_edges e"
                " JOIN sim_entities a ON a.id = e.source_id JOIN sim_entities b ON b.id = e.target_id"
                " WHERE e.sim_id=?", (sim_id,))
    forks = [await fork_simulation(db, config, "c1", 2) for _ in range(2)]
    for fork in forks:
        assert [tuple(f) for f in await db.fetchall(*facts_sql(fork.sim_id))] == [
            ("Council", "Toll", fork.sim_id, fork.sim_id)]
        assert [s["step"] for s in await db.fetchall("SELECT step FROM sim_steps WHERE sim_id=? ORDER BY rowid",
                                                      (fork.sim_id,))] == ["ontology", "graph", "environment"]
    ids = [r[0] for r in await db.fetchall("SELECT id FROM sim_entities ORDER BY id")]
    assert len(ids) == len(set(ids)) == 6
    await db.execute("INSERT INTO sim_entities(sim_id, name, norm_name, type)"
                     " VALUES ('c1', 'Bridge', 'bridge', 'Thing')")
    assert await db.fetchval("SELECT id FROM sim_entities WHERE name='Bridge'") > max(ids)


def test_fork_points_are_thinned_to_the_disk_budget(tmp_path):
    """The latest round and every 2nd, 4th, ... stay; the budget holds; 0 keeps none."""
    pdir = tmp_path / "twitter"
    pdir.mkdir()
    for r in range(1, 11):
        (pdir / "checkpoint.db").unlink(missing_ok=True)   # the child replaces its checkpoint each round
        (pdir / "checkpoint.db").write_bytes(b"x" * 100_000)
        (pdir / "memory.json").unlink(missing_ok=True)
        (pdir / "memory.json").write_text("{}")
        with open(pdir / ACTIONS_LOG, "a") as f:
            f.write(json.dumps({"type": "round_end", "round": r - 1}) + "\n")
        fork_points.keep(tmp_path, "twitter", r, actions=r, trace_rowid=r, budget_mb=0.35)
        kept = fork_points.available(tmp_path, "twitter")
        assert sum(fork_points.sizes(tmp_path)["twitter"].values()) <= 0.35 * 1024 * 1024
        assert kept[-1] == r
    assert kept == [4, 8, 10]
    assert fork_points.read_point(tmp_path, "twitter", 8)["bytes"] == len(
        "".join(line + "\n" for line in log_lines(tmp_path, "twitter")[:8]))
    fork_points.keep(tmp_path, "twitter", 11, actions=11, trace_rowid=11, budget_mb=0)
    assert fork_points.available(tmp_path, "twitter") == []
