"""Scope-wide recall: answers from any world, the relevance floor, neighbour turns, /world's
recent messages, over-long search input, and audiences kept apart."""
from __future__ import annotations

import json

from bot.app import App
from engine.config import parse_config
from engine.memory.audience import Viewer
from engine.memory.message_index import MessageIndex, nearest_on_server
from tests.bot.adapters.test_console import run_bot
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.chat import Person
from tests.helpers.memory import Chat, close_engine, open_engine

PYTHON_CHAT = [
    "how do I read a csv file with pandas",
    "pandas read_csv takes a sep argument for semicolons",
    "use a virtualenv so pip does not touch the system python",
    "list comprehensions are faster than appending in a loop",
    "pytest fixtures can be shared through conftest.py",
    "type hints make the python code easier to read",
]
BAKING_CHAT = [
    "my sourdough bread did not rise in the oven",
    "the oven needs to be hotter for a good crust",
    "Dana feeds her sourdough starter Bubbles before the bread goes in the oven",
    "rye flour makes the dough sticky",
]


async def test_answer_in_another_world_than_the_question_routes_to(db_url):
    db, engine = await open_engine(db_url)
    chat = Chat()
    await engine.ingest_many([chat.msg(t) for t in PYTHON_CHAT + BAKING_CHAT])
    question = "what python name did Dana give her starter"
    routed, _ = await engine.route_query(chat.scope, question)
    answer = await db.fetchone("SELECT id, world_id FROM memory_messages WHERE text LIKE '%Bubbles%'")
    assert routed.id != answer["world_id"]  # the premise: routing alone would miss it
    found = await engine.recall(chat.scope, question)
    assert found.found and found.world.id == routed.id
    hit = next(e for e in found.evidence if e.id == answer["id"])
    assert hit.world_id == answer["world_id"] and hit.world_topic and hit.score > 0
    assert answer["world_id"] in found.worlds and found.worlds[answer["world_id"]].topic == hit.world_topic
    await close_engine(db, engine)


async def test_neighbour_turns_complete_a_hit_and_count_in_k(db_url):
    db, engine = await open_engine(db_url)
    chat = Chat()
    await engine.ingest_many([chat.msg("where did you park the blue van yesterday?", "ann"),
                              chat.msg("next to the old lighthouse", "bob"),
                              chat.msg("the ferry to the island leaves at noon", "cem"),
                              chat.msg("tickets for the ferry cost twelve euros", "dia")])
    found = await engine.recall(chat.scope, "where is the blue van parked", k=2)
    assert [e.text for e in found.evidence] == ["where did you park the blue van yesterday?",
                                                "next to the old lighthouse"]
    question, answer = found.evidence
    assert question.neighbour_of is None and answer.neighbour_of == question.id
    assert len((await engine.recall(chat.scope, "where is the blue van parked", k=1)).evidence) == 1
    await close_engine(db, engine)


async def test_recall_never_crosses_audiences_or_scopes(db_url):
    db, engine = await open_engine(db_url)
    await engine.set_audiences("guild:1", {"staff": "staff-room"})
    ours, theirs, other = Chat("guild:1", "general"), Chat("guild:1", "staff"), Chat("guild:2", "general")
    await engine.ingest_many([ours.msg("the quarterly budget meeting is on friday"),
                              theirs.msg("the quarterly budget has a secret layoff plan"),
                              other.msg("the quarterly budget of the other server is public")])
    everyone = await engine.recall(Viewer("guild:1"), "quarterly budget", k=10)
    assert [e.text for e in everyone.evidence] == ["the quarterly budget meeting is on friday"]
    staff = await engine.recall(Viewer("guild:1", "staff-room"), "quarterly budget", k=10)
    assert {e.text for e in staff.evidence} == {"the quarterly budget meeting is on friday",
                                                "the quarterly budget has a secret layoff plan"}
    assert all(w.scope == "guild:1" for w in staff.worlds.values())
    # Moving the channel into public view updates the index on the next search.
    await engine.set_audiences("guild:1", {"staff": ""})
    assert len((await engine.recall(Viewer("guild:1"), "quarterly budget", k=10)).evidence) == 2
    await close_engine(db, engine)


async def test_a_new_process_finds_the_same_nearest_messages_before_and_after_its_vectors_load(db_url):
    """A process's first search of a scope on PostgreSQL is answered by the server (pgvector) while
    the vectors load; it finds what the loaded index finds, for messages and beliefs' table alike,
    and never another audience's rows."""
    db, engine = await open_engine(db_url)
    await engine.set_audiences("guild:1", {"staff": "staff-room"})
    ours, theirs = Chat("guild:1", "general"), Chat("guild:1", "staff")
    await engine.ingest_many([ours.msg(t) for t in PYTHON_CHAT] + [theirs.msg(t) for t in BAKING_CHAT])
    staff_rows = {r["id"] for r in await db.fetchall("SELECT id FROM memory_messages WHERE channel='staff'")}
    everyone, staff = Viewer("guild:1"), Viewer("guild:1", "staff-room")
    try:
        for query in ["reading csv files with pandas", "why did my sourdough not rise in the oven"]:
            vec = (await engine.embedder.embed([query]))[0]
            cold = MessageIndex()
            first = await cold.search(db, everyone, vec, 4)   # PostgreSQL: the server answers, the load starts
            await cold.settle()
            loaded = await cold.search(db, everyone, vec, 4)
            assert [i for i, _ in first] == [i for i, _ in loaded] and not staff_rows & {i for i, _ in first}
            assert [round(c, 4) for _, c in first] == [round(c, 4) for _, c in loaded]
            if db.dialect == "postgresql":
                for viewer in (everyone, staff):
                    server = await nearest_on_server(db, viewer, vec, 6)
                    local = await cold.search(db, viewer, vec, 6)
                    assert [i for i, _ in server] == [i for i, _ in local]
                    assert max(abs(a - b) for (_, a), (_, b) in zip(server, local)) < 1e-4
                assert staff_rows & {i for i, _ in await nearest_on_server(db, staff, vec, 10)}
                assert await nearest_on_server(db, everyone, vec, 4, "beliefs") == []   # no beliefs without an LLM
    finally:
        await close_engine(db, engine)


async def test_world_without_beliefs_shows_its_recent_messages_and_long_input_is_one_line(tmp_path):
    app = await App.create(parse_config({"bot": {"data_dir": str(tmp_path)}}),
                           features=["bot.features.core", "bot.features.memory"])
    await app.start()
    try:
        bob = Person(app, "bob")
        for line in PYTHON_CHAT:
            await bob.say(line)
        await app.settled()
        world = (await app.memory.worlds("console:test"))[0]
        shown = await bob.say(f"/world {world.id}")
        assert "No beliefs extracted yet. Its latest messages:" in shown
        assert "type hints make the python code easier to read" in shown
        for command in ("/world", "/recall", "/ask"):
            answer = await bob.say(f"{command} {'x' * 50_000}")
            assert answer.count("\n") == 0 and "50,000 characters" in answer, answer[:300]
    finally:
        await app.close()


def test_relevance_floor_at_the_console(tmp_path):
    """Nothing about France in a chat about Python: /recall and /ask say so, without asking the LLM;
    a paraphrase of a stored message passes the floor."""
    with FakeOpenAI(lambda body: json.dumps({"beliefs": []}) if "extract" in json.dumps(body).lower()
                    else "It is read with read_csv [M2].") as server:
        config = (f'[llm]\nbase_url = "{server.base_url}"\nmodel = "fake"\n'
                  '[memory]\nextract_every_n = 1000\nextract_every_s = 600\n')
        lines = PYTHON_CHAT + ["/recall what is the capital of France?", "/ask what is the capital of France?"]
        out = run_bot(tmp_path, "\n".join(lines) + "\n", config_text=config)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("Memory holds nothing about that.") == 2, out.stdout
        assert not [r for r in server.requests if "capital of France" in json.dumps(r)]
        out = run_bot(tmp_path, "/recall loading a comma separated file into a dataframe\n"
                                "/ask how do I load a comma separated file into a dataframe?\n", config_text=config)
        assert "pandas read_csv takes a sep argument" in out.stdout, out.stdout
        assert "It is read with read_csv [M2]." in out.stdout
        assert [r for r in server.requests if "comma separated" in json.dumps(r)]


async def test_the_hnswlib_graph_finds_what_the_exact_search_finds(tmp_path):
    """Above recall_exact_max a partition moves to an hnswlib graph built in the background;
    messages stored meanwhile and afterwards are found, forgotten ones are not."""
    exact_db, exact = await open_engine(tmp_path / "exact.db")
    graph_db, graph = await open_engine(tmp_path / "graph.db", recall_exact_max=4)
    texts = PYTHON_CHAT + BAKING_CHAT
    for engine in (exact, graph):
        chat = Chat()
        await engine.ingest_many([chat.msg(t) for t in texts[:7]])
        await engine.recall(chat.scope, "warm up")      # loads the vectors: the graph build starts
        await engine.ingest_many([chat.msg(t) for t in texts[7:]])
        await engine.recall(chat.scope, "warm up")      # rows stored while it builds
        await engine.messages.settle()
        await engine.ingest_many([chat.msg("the proofing basket needs rice flour", "cem")])
    for query in ["reading csv files", "why did my bread not rise", "rice flour for the basket"]:
        want = [e.text for e in (await exact.recall("test:1", query, 5)).evidence]
        got = [e.text for e in (await graph.recall("test:1", query, 5)).evidence]
        assert got == want and got, query
    await graph.forget("test:1", "general")
    assert not (await graph.recall("test:1", "why did my bread not rise")).evidence
    await close_engine(exact_db, exact)
    await close_engine(graph_db, graph)
