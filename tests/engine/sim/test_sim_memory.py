"""The simulated world becomes memory: a run's posts, quotes, comments and injected events go into
the scope sim:<id> as rounds complete (once, however often a round is observed), the report's post
search is recall over that scope, and /worlds, /recall (--sim) and the recall CLI read it, only
from the simulation's own server or chat.

The run here is the prepared sample (tests.helpers.simdata: camel-oasis's own Platform, no LLM), so the
tests are about ingest and search, not about the run."""
from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone

import pytest

from bot.app import App
from bot.scheduler import build_digest
from engine.config import LLMSection, MemorySection, parse_config
from engine.llm import LLMClient
from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.sim.report.post_search import MemoryPostSearch
from engine.sim.report.sources import PersonaInterviewer, StoreGraph, keyword_score, load_roster, terms
from engine.sim.report.stats import compute_stats
from engine.sim.report.tools import ReportTools
from engine.sim.run.observers import RoundDone
from engine.sim.sim_memory import ingest_round, ingest_run, round_observer
from tests.helpers.bot_process import run_cli
from tests.helpers.chat import Person
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.simdata import sample_simulation, write_environment, write_graph

INJECTED = {"type": "injected", "platform": "twitter", "round": 2, "id": "inj1", "source": "City News",
            "text": "Breaking: the council postpones the fare increase until spring.", "asked_by": "console:root",
            "post_id": 5}


@pytest.fixture
def folder(tmp_path_factory, tmp_path):
    """The sample run, with an event injected in round 3 on Twitter as /sim inject publishes it: a
    post by a source account, and a line in actions.jsonl."""
    folder = sample_simulation(tmp_path_factory, tmp_path)
    write_environment(folder)
    with sqlite3.connect(folder / "twitter" / "twitter.db") as conn:
        conn.execute("INSERT INTO user(user_id, agent_id, user_name, name, bio, created_at, num_followings,"
                     " num_followers) VALUES (6, 6, 'citynews', 'City News', 'news', 2, 0, 0)")
        conn.execute("INSERT INTO post(post_id, user_id, content, created_at, num_likes, num_dislikes, num_shares)"
                     " VALUES (5, 6, ?, 2, 0, 0, 0)", (INJECTED["text"],))
    with (folder / "twitter" / "actions.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("\n" + json.dumps(INJECTED) + "\n")   # after the line a crash cut short
    return folder


async def stored(db, sim_id: str = "sim1") -> dict[str, tuple[str, str, str]]:  # noqa: F811
    rows = await db.fetchall("SELECT message_id, channel, author, text, ts FROM memory_messages WHERE scope=?",
                             (f"sim:{sim_id}",))
    return {r["message_id"]: (r["author"], r["text"], r["ts"]) for r in rows}


async def test_rounds_are_remembered_once_however_often_observed(folder, db, embedder, openai_server):  # noqa: F811
    llm = LLMClient(LLMSection(base_url=openai_server.base_url, model="m", timeout_s=5))
    memory = MemoryEngine(db, embedder, MemorySection(), llm=llm)
    observe = round_observer(memory)
    done = RoundDone("sim1", folder, "twitter", 1)
    await observe(done)
    first = await stored(db)
    # round 1 on Twitter: two posts; the repost carries no words of its own
    assert {k: v[:2] for k, v in first.items()} == {
        "twitter:post:1": ("Alice", "The city council announced a 20% transit fare hike."),
        "twitter:post:2": ("Bob", "I oppose the fare hike, it hurts commuters.")}
    # at the round's simulated time (the environment starts at 08:00, an hour a round)
    assert datetime.fromisoformat(first["twitter:post:1"][2]) == datetime(2025, 1, 1, 8, 0, 1, tzinfo=timezone.utc)
    await observe(done)                       # a resume observes the round again
    assert await stored(db) == first

    assert await ingest_round(memory, folder, "sim1", "twitter", 2) == 1   # the quote, read from the database
    assert await ingest_run(memory, folder, "sim1") == 5                   # what was not fed yet
    assert await ingest_run(memory, folder, "sim1") == 0
    everything = await stored(db)
    assert everything["twitter:post:4"][:2] == ("Frank", "Agreed, commuters pay enough already.")
    assert datetime.fromisoformat(everything["twitter:post:4"][2]).hour == 9            # round 2
    assert everything["twitter:post:5"][:2] == ("City News", INJECTED["text"])           # round 3
    assert everything["reddit:comment:2"][:2] == ("Dave", "People will switch to bikes.")
    assert set(everything) == {"twitter:post:1", "twitter:post:2", "twitter:post:4", "twitter:post:5",
                               "reddit:post:1", "reddit:comment:1", "reddit:comment:2", "reddit:post:2"}
    # the discourse has topic worlds, named without the LLM: a simulation's memory makes no LLM call
    await memory.flush()
    worlds = await memory.worlds(Viewer("sim:sim1"))
    assert worlds and all(w.topic for w in worlds)
    assert openai_server.requests == []
    assert await memory.worlds(Viewer("console:local")) == []
    await memory.close()
    await llm.close()


async def test_report_post_search_is_recall_over_the_sim_scope(folder, db, embedder, openai_server):  # noqa: F811
    graph = await write_graph(db, "sim1", folder, embedder)
    llm = LLMClient(LLMSection(base_url=openai_server.base_url, model="m", timeout_s=5))
    memory = MemoryEngine(db, embedder, MemorySection())
    stats = compute_stats(folder)
    posts = MemoryPostSearch(memory, "sim1", folder, stats)
    assert await posts.prepare() == 8          # the report feeds a run nobody observed
    tools = ReportTools(stats, StoreGraph(graph, "sim1"), PersonaInterviewer(llm, folder), load_roster(folder), llm,
                        posts=posts)
    query = "cycling to work instead"
    # the old keyword score found nothing for it: no post shares a word with the query
    assert all(keyword_score(terms(query), p.content) == 0 for p in stats.posts)
    found = json.loads(await tools.call("quick_search", json.dumps({"query": query})))["simulation_posts"]
    bikes = next(p for p in found if p["content"] == "People will switch to bikes.")
    # a comment cites the post it answers, with its own author
    assert bikes["cite"] == "[reddit post 1]" and bikes["author"] == "@dave"
    assert bikes["comment_on"]["content"] == "Discussion: what will the fare hike do to ridership?"
    assert tools.sources["[reddit post 1]"].startswith("@carol: Discussion") and "[agent @dave]" in tools.sources
    # the injected event is a post like any other, by its source account
    news = json.loads(await tools.call("quick_search", json.dumps({"query": "fare increase postponed"})))
    assert news["simulation_posts"][0]["cite"] == "[twitter post 5]"
    assert news["simulation_posts"][0]["author"] == "@citynews"
    await memory.close()
    await llm.close()


async def test_recall_and_worlds_of_a_simulation_only_in_its_own_chat(folder, tmp_path):
    data = tmp_path / "data"
    app = await App.create(parse_config({"bot": {"data_dir": str(data)}}),
                           features=["bot.features.core", "bot.features.memory"])
    await app.start()
    try:
        for sim_id, scope in (("sim1", "console:test"), ("other", "discord:999")):
            await app.db.execute("INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
                                 " VALUES (?, ?, 'general', 'r', '{}', ?, '2026-01-01')", (sim_id, scope, str(folder)))
        await ingest_run(app.memory, folder, "sim1")
        await ingest_run(app.memory, folder, "other")
        bob = Person(app, "bob")
        found = await bob.say("/recall --sim sim1 who opposes the fare hike")
        assert "Bob" in found and "I oppose the fare hike, it hurts commuters." in found
        assert (await bob.say("/worlds --sim sim1")).split(" ", 1)[1].startswith("world")
        # another server's simulation is refused like one that does not exist, in one line
        for command in ("/recall --sim other fare hike", "/worlds --sim other", "/recall --sim nope fare"):
            refused = await bob.say(command)
            assert "no simulation" in refused and "here" in refused and "\n" not in refused.strip()
        # the chat's own memory holds none of it, nor does its digest
        assert "No worlds yet" in await bob.say("/worlds")
        digest = await build_digest(app, "console:test", "2000-01-01T00:00:00+00:00", "general")
        assert "fare" not in digest.lower() and "sim:" not in digest
    finally:
        await app.close()
    (tmp_path / "config.toml").write_text(f'[bot]\ndata_dir = "{data}"\n', encoding="utf-8")
    done = run_cli(tmp_path, "recall", "--scope", "sim:sim1", "--json", "bikes")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert row["messages"][0]["message_id"] == "reddit:comment:2" and row["messages"][0]["channel"] == "reddit"
