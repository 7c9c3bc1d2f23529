"""Step 4 end to end as pipeline step "run": the real child process, camel-oasis and the openai
client against the fake server, driven and interviewed through the console adapter.
(Each child start imports oasis, torch and transformers: the test reuses one run for all checks.)"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.memory.audience import Viewer
from engine.sim.run.output import ACTIONS_LOG, platform_db
from tests.fakes.openai_server import Raw, SocialResponder
from tests.fakes.stance_responder import StanceResponder, WithStances
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import console_bot, make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)


def log_events(folder: Path, platform: str) -> list[dict]:
    return [json.loads(line) for line in (folder / platform / ACTIONS_LOG).read_text().splitlines()]


def db_count(folder: Path, platform: str, sql: str) -> int:
    with sqlite3.connect(platform_db(folder, platform)) as conn:
        return conn.execute(sql).fetchone()[0]


def words_written(folder: Path) -> set[str]:
    """The memory ids of the run's posts with words of their own (plain reposts have none) and comments."""
    ids = set()
    for platform in ("twitter", "reddit"):
        with sqlite3.connect(platform_db(folder, platform)) as conn:
            ids |= {f"{platform}:post:{i}" for (i,) in conn.execute(
                "SELECT post_id FROM post WHERE original_post_id IS NULL OR quote_content IS NOT NULL")}
            ids |= {f"{platform}:comment:{i}" for (i,) in conn.execute("SELECT comment_id FROM comment")}
        conn.close()
    return ids


class MidRound:
    """Wraps a responder: for each agent step's request (one offering tools), whether a platform's
    actions.jsonl already held actions of a round not yet ended (actions logged as they happen)."""

    def __init__(self, inner, folder: Path):
        self.inner, self.folder = inner, folder
        self.seen: list[bool] = []

    def __call__(self, body: dict):
        if body.get("tools"):
            self.seen.append(any(self._open_round_actions(p) for p in ("twitter", "reddit")))
        return self.inner(body)

    def _open_round_actions(self, platform: str) -> int:
        path = self.folder / platform / ACTIONS_LOG
        count = 0
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                kind = json.loads(line)["type"]
            except ValueError:   # the child is writing it
                continue
            count = 0 if kind in ("round_start", "round_end") else count + (kind == "action")
        return count


# SQLite only (a real OASIS run): its rows (interviews, stances, sim memory) are written on both backends in
# test_simrun_budget.py, test_stance.py and test_sim_memory.py.
async def test_run_step_both_platforms_interviews_and_chat_control(openai_server, tmp_path, capsys):
    # slow enough to ask during a round; the stance of each round's agents is classified too
    social, stances = SocialResponder(delay=0.15), StanceResponder()
    folder = tmp_path / "sim"
    responder = openai_server.responder = probe = MidRound(WithStances(social, stances), folder)
    app, console = await console_bot(tmp_path, openai_server.base_url, run_idle_s=120.0)
    runs = app.sims.runs
    try:
        # steps 1-3 are recorded as done: the pipeline goes straight to the run
        cfg = make_sim_folder(folder, agents=6, rounds=3, sim_id="c1")
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('c1', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "toll?"}), str(folder)))
        for step in ("ontology", "graph", "environment"):
            await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('c1', ?, 'x')", (step,))
        await console.handle_line("/interview c1 all hello?")
        assert "has not reached its run yet" in capsys.readouterr().out
        job = await app.jobs.submit("simulation", {"sim_id": "c1"}, "console:local", channel="console")

        async def some_round_done() -> bool:
            state = await runs.get("c1")
            return bool(state and state.status == "running" and any(state.rounds_done.values()))
        await until(some_round_done, 120)
        await console.handle_line("/interview c1 ben Will you pay the toll? --platform twitter")
        out = capsys.readouterr().out
        assert "• Ben [twitter, agent 1, after round " in out and "'Will you pay the toll?'" in out
        during = (await runs.interviews("c1"))[0]
        assert during.round < cfg.time.rounds

        finished = await app.jobs.wait(job.id)
        assert finished.state == "done", finished.error
        run = finished.result["steps"]["run"]
        assert run["rounds"] == 3 and run["twitter actions"] > 0 and run["reddit actions"] > 0
        # the run's requests are the job's LLM usage: 3 rounds of 7 + 5 agent steps, 1 interview,
        # and the stance classification after each round of each platform
        assert stances.calls >= 6
        assert finished.result["llm_calls"] == 3 * 7 + 3 * 5 + 1 + stances.calls
        assert "round 3/3" in capsys.readouterr().out  # the progress message followed the run
        # actions are logged as they happen: agent 3's second step of each round, on each platform,
        # already finds the round's first steps in the log (logged once a round, none would)
        assert sum(probe.seen) >= 3 * 2

        for platform, steps in (("twitter", 7), ("reddit", 5)):  # agents 0 and 4: Twitter only
            events = log_events(folder, platform)
            assert events[0]["type"] == "setup" and events[0]["follows"] == db_count(
                folder, platform, "SELECT count(*) FROM follow")
            ends = [e for e in events if e["type"] == "round_end"]
            assert [e["round"] for e in ends] == [0, 1, 2]
            assert events[-1]["type"] == "simulation_end" and events[-1]["rounds_done"] == 3
            assert sum(e["llm_steps"] for e in ends) == 3 * steps  # one step each, two for agent 3
            # agent 3's second step of a round saw its feed too (its refresh was recorded)
            assert db_count(folder, platform, "SELECT count(*) FROM trace WHERE action='refresh'"
                                              " AND user_id=3") == 6
            actions = [e for e in events if e["type"] == "action"]
            posts = sum(1 for e in actions if e["action"] == "create_post")
            assert posts >= 2 and posts == db_count(folder, platform, "SELECT count(*) FROM post")
        # the initial post went out on both platforms in round 0, the event only on Reddit in round 1
        reddit = [e for e in log_events(folder, "reddit") if e["type"] == "action"]
        assert any(e["info"].get("content") == "The toll starts Monday." and e["round"] == 0 for e in reddit)
        assert any(e["info"].get("content") == "BREAKING: council delays the toll" and e["round"] == 1
                   for e in reddit)
        assert not any("BREAKING" in str(e.get("info")) for e in log_events(folder, "twitter"))
        # every post and comment of the run went into the simulation's memory scope as its round ended
        remembered = {r["message_id"] for r in await app.db.fetchall(
            "SELECT message_id FROM memory_messages WHERE scope='sim:c1'")}
        assert remembered == words_written(folder) and any(i.startswith("reddit:post:") for i in remembered)
        found = await app.sims.memory.recall(Viewer("sim:c1"), "when does the toll start")
        assert "The toll starts Monday." in [e.text for e in found.evidence]
        assert db_count(folder, "twitter", "SELECT count(*) FROM trace WHERE action='interview'") == 1

        await console.handle_line("/sim status c1")
        status = capsys.readouterr().out
        assert "4. run: done" in status and "run: idle: rounds" in status and "open for interviews" in status
        assert "beliefs after round 3: twitter " in status and "; reddit " in status

        # after the last round the environment is still open: everyone on both platforms
        answers = await runs.interview("c1", None, "How did it go?", None)
        assert sorted((a.platform, a.agent_id) for a in answers) == sorted(
            [("twitter", i) for i in range(6)] + [("reddit", i) for i in (1, 2, 3, 5)])
        assert all(a.answer and not a.error and a.round == 3 for a in answers)

        # the model fails every interview: one line for all agents, in one sentence
        openai_server.responder = lambda body: (responder(body) if body.get("tools") else
                                                Raw(500, {"error": {"message": "model crashed"}}))
        await console.handle_line("/interview c1 all Still there?")
        out = capsys.readouterr().out
        assert out.count("could not answer") == 1 and "•" not in out
        assert ("6 agents could not answer: The LLM endpoint failed "
                "(HTTP 500: model crashed): check that the server is healthy and read its log.") in out
        openai_server.responder = responder
        await console.handle_line("/interview c1 zed Hi?")
        assert "no agent 'zed'" in capsys.readouterr().out
        await console.handle_line("/sim resume c1")
        assert "has finished; there is nothing to resume" in capsys.readouterr().out

        # closed, then reopened from the databases (with the agents' memories) for a question
        assert await runs.release("c1")
        await until(lambda: _status(runs, "c1", "completed"), timeout=30)
        await console.handle_line("/sim stop c1")
        assert "is not running" in capsys.readouterr().out
        await console.handle_line("/interview c1 Dev,cleo Looking back, what changed? --platform reddit")
        out = capsys.readouterr().out
        assert "• Cleo [reddit, agent 2, after round 3]: My view on 'Looking back" in out
        assert "• Dev [reddit, agent 3" in out and "[twitter" not in out
        assert await runs.release("c1")
        rows = await app.db.fetchall("SELECT agent_name, platform FROM sim_interviews WHERE sim_id='c1' ORDER BY id")
        assert len(rows) == 1 + 10 + 10 + 2 and rows[0]["agent_name"] == "Ben" and rows[-1]["platform"] == "reddit"
        assert all(p.stat().st_size == 0 for p in (folder / "log").iterdir())  # oasis's debug logs tamed
        assert "db_path" in (folder / "run.log").read_text()  # oasis's prints went to the log, not the protocol
        assert not social.rejected  # trimmed memories and mid-step interviews kept tool calls whole
    finally:
        await app.close()


async def _status(runs, sim_id: str, status: str) -> bool:
    state = await runs.get(sim_id)
    return state is not None and state.status == status
