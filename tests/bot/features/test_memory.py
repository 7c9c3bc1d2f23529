"""The memory commands end to end through App.dispatch, as the console and Telegram drive them."""
from __future__ import annotations

from bot.app import App
from engine.config import parse_config
from tests.helpers.chat import Person
from tests.helpers.config import MINILM


async def test_memory_commands(tmp_path):
    config = parse_config({"bot": {"data_dir": str(tmp_path)}, **MINILM,
                           "memory": {"base_threshold": 0.3}})  # a MiniLM threshold
    app = await App.create(config, features=["bot.features.core", "bot.features.memory"])
    await app.start()
    try:
        bob, admin = Person(app, "bob"), Person(app, "root", admin=True)
        assert "No worlds yet" in await bob.say("/worlds")
        for line in ["how do I read a csv file with pandas", "pandas read_csv takes a sep argument",
                     "my sourdough bread did not rise in the oven"]:
            assert await bob.say(line) == ""
        assert await bob.say("the bakery sells rye bread on sundays", channel="food") == ""
        listing = await bob.say("/worlds")
        assert listing.startswith("2 worlds") or listing.startswith("3 worlds"), listing
        engine = app.memory
        worlds = await engine.worlds("console:test")
        pandas_world = next(w for w in worlds if "pandas" in w.topic.lower() or "csv" in w.topic.lower())

        shown = await bob.say(f"/world {pandas_world.id}")
        assert pandas_world.id in shown and "No beliefs extracted yet" in shown
        assert "no world matches" in await bob.say("/world nosuchthing")
        assert pandas_world.id in await bob.say(f"/world {pandas_world.id[:4]}")
        word = next(w for w in ("pandas", "csv") if w in pandas_world.topic.lower())
        assert pandas_world.id in await bob.say(f"/world {word.upper()}")
        assert "no world matches" in await bob.say("/world %")

        recalled = await bob.say("/recall reading csv files in pandas")
        assert pandas_world.id in recalled and "read_csv takes a sep argument" in recalled
        asked = await bob.say("/ask how do I read a csv?")
        assert "No language model is configured" in asked and "read_csv" in asked

        assert "only an administrator may use /memory." in await bob.say("/memory off")
        assert "no longer remember" in await admin.say("/memory off")
        await bob.say("pandas merge is confusing")
        await app.settled()  # plain messages are stored in batches, after handle returns
        assert sum(w.evidence for w in await engine.worlds("console:test")) == 4
        await admin.say("/memory on")
        await bob.say("pandas merge is confusing")
        await admin.say("numpy arrays and pandas frames share their dtypes")
        await app.settled()
        assert sum(w.evidence for w in await engine.worlds("console:test")) == 6

        # any member forgets their own messages, in every channel; other people's stay
        assert "nothing to confirm" in await bob.say("/forget confirm")
        assert "only an administrator may use /forget." in await bob.say("/forget")
        assert "only an administrator may use /forget all." in await bob.say("/forget all")
        assert "nothing to confirm" in await bob.say("/forget confirm")  # the refusals left nothing pending
        assert "every message of yours" in await bob.say("/forget me")
        assert "Forgot your messages here: 5 messages" in await bob.say("/forget confirm")
        left = await app.db.fetchall("SELECT author, author_id, text FROM memory_messages WHERE scope=?",
                                     ("console:test",))
        assert [tuple(r) for r in left] == [("root", "root", "numpy arrays and pandas frames share their dtypes")]
        assert sum(w.evidence for w in await engine.worlds("console:test")) == 1

        assert "/forget confirm within 60 s" in await admin.say("/forget")
        assert "Forgot this channel: 1 message," in await admin.say("/forget confirm")
        await bob.say("the bakery sells rye bread on sundays", channel="food")
        await admin.say("/forget all")
        assert "Forgot this server or chat" in await admin.say("/forget confirm")
        assert await engine.worlds("console:test") == []
    finally:
        await app.close()


async def oven_chat(tmp_path, llm: dict) -> tuple[App, Person]:
    """A started app with memory and the LLM section ``llm``, and bob, who told it about an oven."""
    config = parse_config({"bot": {"data_dir": str(tmp_path)}, "llm": llm, "memory": {"extract_every_s": 600}})
    app = await App.create(config, features=["bot.features.core", "bot.features.memory"])
    await app.start()
    bob = Person(app, "bob")
    await bob.say("the sourdough bread needs a hotter oven")
    return app, bob


async def test_ask_with_a_failing_llm_falls_back_to_recall(tmp_path):
    from tests.fakes.openai_server import FakeOpenAI, Raw
    with FakeOpenAI(lambda body: Raw(500, {"error": {"message": "overloaded"}})) as server:
        app, bob = await oven_chat(tmp_path, {"base_url": server.base_url, "max_retries": 0})
        try:
            answer = await bob.say("/ask how hot should the oven be?")
            assert answer.startswith("⚠ The LLM endpoint failed (HTTP 500: overloaded): "  # its address: in the log
                                     "check that the server is healthy") and "hotter oven" in answer
            assert "{" not in answer.splitlines()[0]
            assert server.requests  # the LLM was asked
        finally:
            await app.close()


async def test_ask_with_the_llm_down_answers_within_seconds(tmp_path):
    """Default retries (5, up to 60 s apart) hold for jobs; a person waiting gets one retry."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    app, bob = await oven_chat(tmp_path, {"base_url": dead})
    try:
        started = time.monotonic()
        answer = await bob.say("/ask how hot should the oven be?")
        assert time.monotonic() - started < 5
        first = answer.splitlines()[0]
        assert first == ("⚠ The LLM endpoint could not be reached after 2 tries: check that the server "
                         "is running and that [llm] base_url is right. Here is what memory holds:")
    finally:
        await app.close()


def answers_in_english_first(english: str, portuguese: str):
    """/ask: the first answer in English, a corrected one in Portuguese (or English again when
    ``portuguese`` is None); anything else: a topic name."""
    def answer(body: dict):
        system = body["messages"][0]["content"]
        if "Answer the question using ONLY" not in system:
            return '{"name": "garagem"}'
        corrected = body["messages"][-1]["role"] == "user" and body["messages"][-1]["content"].startswith("You wrote")
        return portuguese if corrected and portuguese else english
    return answer


async def test_ask_answers_in_the_language_of_the_question_or_of_its_channel(tmp_path):
    from tests.fakes.openai_server import FakeOpenAI
    english = "The garage leak will be fixed on Thursday by the plumber [M1]."
    portuguese = "O vazamento na garagem será consertado na quinta-feira pelo encanador [M1]."
    with FakeOpenAI(answers_in_english_first(english, portuguese)) as server:
        app, bob = await oven_chat(tmp_path, {"base_url": server.base_url})
        try:
            for line in ["o encanador vem consertar o vazamento da garagem na quinta-feira",
                         "a garagem do prédio está alagada de novo por causa do vazamento"]:
                await bob.say(line)
            await app.settled()
            server.requests.clear()
            answer = await bob.say("/ask quando vão consertar o vazamento na garagem do prédio?")
            asks = [r for r in server.requests if "Answer the question using ONLY" in r["messages"][0]["content"]]
            assert asks[0]["messages"][0]["content"].endswith("Answer in Brazilian Portuguese.")
            # the answer came in English: asked again once, with the correction; the user sees Portuguese
            assert len(asks) == 2 and asks[1]["messages"][-1]["content"] == (
                "You wrote that in English. Write the same answer in Brazilian Portuguese, nothing else.")
            assert portuguese in answer and english not in answer
            # a question too short to tell takes the channel's language
            server.requests.clear()
            await bob.say("/ask garagem?")
            asks = [r for r in server.requests if "Answer the question using ONLY" in r["messages"][0]["content"]]
            assert asks[0]["messages"][0]["content"].endswith("Answer in Brazilian Portuguese.")
        finally:
            await app.close()


async def test_ask_keeps_an_answer_still_in_another_language_after_one_correction(tmp_path):
    from tests.fakes.openai_server import FakeOpenAI
    english = "The garage leak will be fixed on Thursday by the plumber [M1]."
    with FakeOpenAI(answers_in_english_first(english, None)) as server:
        app, bob = await oven_chat(tmp_path, {"base_url": server.base_url})
        try:
            await bob.say("o encanador vem consertar o vazamento da garagem na quinta-feira")
            await app.settled()
            server.requests.clear()
            answer = await bob.say("/ask quando vão consertar o vazamento na garagem do prédio?")
            asks = [r for r in server.requests if "Answer the question using ONLY" in r["messages"][0]["content"]]
            assert len(asks) == 2 and english in answer   # one correction, then the answer beats none
        finally:
            await app.close()
