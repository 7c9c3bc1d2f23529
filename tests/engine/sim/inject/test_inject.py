"""/sim inject end to end: events scheduled before the run and during it (through the console),
published by their source accounts in the requested round on the real camel-oasis platforms,
seen in the agents' prompts (the fake server keeps every request) from that round on, logged,
shown in progress and /sim status, marked on the report's chart and timeline. One real run
serves every check (each child start imports oasis, torch and transformers)."""
from __future__ import annotations

import getpass
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from engine.sim import pipeline
from engine.sim.report.agent import timeline
from engine.sim.report.charts import draw_charts
from engine.sim.report.stats import compute_stats
from engine.sim.run.child.injector import SOURCE_BIO
from engine.sim.run.output import ACTIONS_LOG, platform_db
from tests.fakes.openai_server import FakeOpenAI, SocialResponder
from tests.helpers.sim import make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)
FEATURES = ["bot.features.core", "bot.features.simulation"]
AGENTS, ROUNDS = 4, 4
BRIDGE = "The bridge closes for repairs"
COUNCIL = "Council votes on the toll tonight"
STORM = "Storm warning for the coast"


class GatedSocial(SocialResponder):
    """SocialResponder that holds the request after the first ``hold_at`` tool requests until
    ``gate`` is set: the run is then caught between two rounds, for a live injection."""

    def __init__(self, hold_at: int):
        super().__init__()
        self.hold_at = hold_at
        self.gate, self.holding = threading.Event(), threading.Event()

    def __call__(self, body: dict):
        if body.get("tools") and self.tool_requests == self.hold_at and not self.gate.is_set():
            self.holding.set()
            self.gate.wait(60)  # the fake server's loop waits with it: nothing else is answered meanwhile
        return super().__call__(body)


@pytest.fixture(scope="module")
def llm():
    with FakeOpenAI(SocialResponder()) as server:
        yield server


def posts_by(folder: Path, platform: str, source: str) -> list[tuple]:
    with sqlite3.connect(platform_db(folder, platform)) as conn:
        return conn.execute("SELECT p.post_id, p.created_at, u.user_id FROM post p JOIN user u"
                            " ON u.user_id = p.user_id WHERE u.name = ? AND u.bio = ? ORDER BY p.post_id",
                            (source, SOURCE_BIO)).fetchall()


def prompts(requests: list[dict], name: str, platform: str) -> list[str]:
    """The observation (last user message) of each step of agent ``name`` on ``platform``, in order;
    the system message tells the platforms apart (the fixture's Twitter and Reddit personas)."""
    marker = f"{name} lives in town" if platform == "twitter" else f"{name} reads the local news"
    return [next(m["content"] for m in reversed(r["messages"]) if m["role"] == "user")
            for r in requests if r.get("tools") and marker in r["messages"][0]["content"]]


# SQLite only (a real OASIS run): injections live in the simulation's folder (injections.json), not the database.
async def test_injected_events_reach_databases_prompts_logs_status_and_report(llm, tmp_path, capsys):
    config = tmp_path / "config.toml"
    config.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{llm.base_url}"\n'
                      f'[jobs]\nprogress_interval_s = 0.05\n[simulation]\nrun_idle_s = 0.5\n')
    app = await App.create(load_config(config), FEATURES)
    app.sims.steps = pipeline.STEPS[:4]  # the job ends with the run (the report has tests of its own)
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    runs = app.sims.runs
    say = console.handle_line
    try:
        folder = tmp_path / "sim"
        make_sim_folder(folder, agents=AGENTS, rounds=ROUNDS, sim_id="i1", everyone_everywhere=True)
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('i1', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "toll?"}), str(folder)))
        for step in ("ontology", "graph", "environment"):
            await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('i1', ?, 'x')", (step,))

        # before the run: scheduled for a round, on one platform or both, by the default source or another
        await say(f"/sim inject i1 {BRIDGE} --round 3")
        out = capsys.readouterr().out
        assert f"📰 Scheduled for the start of round 3 on twitter and reddit: News Desk posts “{BRIDGE}”" in out
        await say(f'/sim inject i1 {COUNCIL} --round 2 --platform twitter --as "City Council"')
        assert "round 2 on twitter: City Council posts" in capsys.readouterr().out
        # bad input: one line each, nothing written
        for line, said in (("/sim inject i1 --round 2", "⚠ the event's text is empty: say what happens"),
                           ("/sim inject i1 soon --round 5", "round 5 is beyond the last round (4)"),
                           ("/sim inject i1 soon --round 0", "rounds count from 1; the next round is 1"),
                           ("/sim inject i1 soon --platform mastodon", "platform must be one of twitter, reddit, both"),
                           (f"/sim inject i1 {'x' * 1001}", "the event's text is 1001 characters long; at most 1000"),
                           ("/sim inject zz soon", "no simulation zz here"),
                           ("/sim status i1 soon", "/sim status takes no text: only a simulation id")):
            await say(line)
            out = capsys.readouterr().out
            assert said in out and out.count("\n") == 1, (line, out)
        await say("/sim status i1")
        status = capsys.readouterr().out
        assert (f"📰 round 3 · News Desk: {BRIDGE} — scheduled on twitter and reddit · asked by {getpass.getuser()}"
                in status)
        assert f"📰 round 2 · City Council: {COUNCIL} — scheduled on twitter ·" in status

        # during the run: held at the first step of round 2, an event for the next round not begun (3)
        responder = llm.responder = GatedSocial(hold_at=2 * AGENTS)
        llm.requests.clear()
        job = await app.jobs.submit("simulation", {"sim_id": "i1"}, "console:local", channel="console")

        async def between_rounds() -> bool:
            state = await runs.get("i1")
            return responder.holding.is_set() and bool(state and state.live and any(state.rounds_done.values()))
        await until(between_rounds, 120)
        await say("/sim inject i1 soon --round 1")
        assert "round 1 has already begun or is over; the next round is 3" in capsys.readouterr().out
        await say(f"/sim inject i1 {STORM}")
        out = capsys.readouterr().out
        assert f"Scheduled for the start of round 3 on twitter and reddit: News Desk posts “{STORM}”" in out
        assert "had already begun" not in out
        responder.gate.set()
        finished = await app.jobs.wait(job.id)
        assert finished.state == "done", finished.error
        progress = capsys.readouterr().out
        assert f"📰 round 3: News Desk: {BRIDGE}" in progress and f"📰 round 2: City Council: {COUNCIL}" in progress

        # the source accounts posted in the requested round (the sandbox time of its start), made no LLM call
        hour = 3600
        assert responder.tool_requests == AGENTS * 2 * ROUNDS
        news = posts_by(folder, "twitter", "News Desk")
        assert [created for _, created, _ in news] == [2 * hour, 2 * hour]
        assert [created for _, created, _ in posts_by(folder, "twitter", "City Council")] == [1 * hour]
        assert [created for _, created, _ in posts_by(folder, "reddit", "News Desk")] == ["2025-01-01 11:00:00"] * 2
        assert posts_by(folder, "reddit", "City Council") == []
        assert all(user_id >= AGENTS for _, _, user_id in news)  # a user row of its own, no agent's

        for platform in ("twitter", "reddit"):
            lines = [json.loads(x) for x in (folder / platform / ACTIONS_LOG).read_text().splitlines()]
            injected = [x for x in lines if x["type"] == "injected"]
            expected = ([(1, "City Council", COUNCIL)] if platform == "twitter" else []) + [
                (2, "News Desk", BRIDGE), (2, "News Desk", STORM)]
            assert [(x["round"], x["source"], x["text"]) for x in injected] == expected
            assert all(x["asked_by"] == getpass.getuser() for x in injected)
            posted = {row[0] for row in posts_by(folder, platform, "News Desk")}
            assert {x["post_id"] for x in injected if x["source"] == "News Desk"} == posted
            # the sources' posts are not counted as agents' actions
            assert not any(x["type"] == "action" and x["agent_id"] >= AGENTS for x in lines)

            # every agent saw the event from its round on, and not before
            for name in ("Ada", "Ben", "Cleo", "Dev"):
                seen = prompts(llm.requests, name, platform)
                assert len(seen) == ROUNDS
                breaking = f"Breaking news (round 3) from News Desk: {BRIDGE}"
                assert [breaking in p for p in seen] == [False, False, True, True]
                assert [STORM in p for p in seen] == [False, False, True, True]
                assert [COUNCIL in p for p in seen] == ([False, True, True, True] if platform == "twitter"
                                                        else [False] * ROUNDS)

        await say("/sim status i1")
        status = capsys.readouterr().out
        assert f"📰 round 3 · News Desk: {BRIDGE} — published on twitter and reddit at round 3" in status
        assert f"{COUNCIL} — published on twitter at round 2" in status

        # the report: marked on the activity chart, written into the timeline
        stats = compute_stats(folder)
        assert [(e.round, e.source, sorted(e.posts)) for e in stats.injected] == [
            (1, "City Council", ["twitter"]), (2, "News Desk", ["reddit", "twitter"]),
            (2, "News Desk", ["reddit", "twitter"])]
        text = "\n".join(timeline(stats))
        assert (f"📰 injected event: News Desk posted on twitter and reddit: “{BRIDGE}”, asked by {getpass.getuser()}"
                in text)
        assert text.index("**Round 2**") < text.index(COUNCIL) < text.index("**Round 3**") < text.index(BRIDGE)
        assert draw_charts(stats, folder)["activity"].stat().st_size > 0
    finally:
        await app.close()


def test_injections_file_keeps_every_event_of_concurrent_writers_and_a_broken_file_is_no_list(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from engine.sim.inject.request import injection_status
    from engine.sim.run.injections import Injection, append_injection, read_injections

    def add(i: int) -> None:
        append_injection(tmp_path, Injection(id=f"e{i}", round=1 + i % 3, platforms=("twitter",), source="News Desk",
                                             text=f"event {i}"))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, range(40)))
    assert sorted(e.id for e in read_injections(tmp_path)) == sorted(f"e{i}" for i in range(40))
    assert all(s.published == {} for s in injection_status(tmp_path))
    (tmp_path / "injections.json").write_text('{"id": "x"}')
    with pytest.raises(ValueError, match="holds no list of events"):
        read_injections(tmp_path)
    assert injection_status(tmp_path) == []
