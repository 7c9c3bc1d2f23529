"""At most once: a restart does not run a command again (bot/once.py).

The real bot process on the Telegram fake takes one batch: a few plain messages, ``/simulate``
with a document (it creates a simulation and its job, then answers) and ``/ask`` (it waits on the
LLM). It is killed with SIGKILL while ``/ask`` waits, so the whole batch is still in the inbox, and
restarted: the finished ``/simulate`` is not run again (one simulation, one answer), the cut-off
``/ask`` is not asked again but announced, and every plain message is stored once. On both
backends: the marks live in the inbox table."""
from __future__ import annotations

import pytest

from engine.db import open_database
from tests.fakes.openai_server import FakeOpenAI, Raw, completion
from tests.fakes.telegram_server import USER_ID, FakeTelegram
from tests.helpers.bot_process import kill_9, start_bot, stop, telegram_config
from tests.helpers.wait import until

TOKEN = "123:TEST"
CHAT = USER_ID   # the private chat of the bot's owner (its id is theirs): they may /simulate
QUESTION = "what did they say about the harbour strike?"
pytestmark = pytest.mark.timeout(300)


def texts(server) -> list[str]:
    return [c.params.get("text") or "" for c in server.calls_of("sendMessage")]


def asks(llm) -> int:
    return sum(QUESTION in (r["messages"][-1].get("content") or "") for r in llm.requests)


async def test_a_restart_runs_no_finished_or_cut_off_command_again(tmp_path, db_url):
    server = await FakeTelegram(TOKEN).start()
    llm = FakeOpenAI(lambda body: Raw(body=completion("too late"), delay=200)).start()  # every answer stalls
    cfg = telegram_config(tmp_path, server, database=db_url, sections={
        "bot": {"owner_ids": [f"telegram:{USER_ID}"]},
        "llm": {"base_url": llm.base_url, "model": "m", "retry_max_wait_s": 1},
        "simulation": {"confirm_above_usd": 0, "confirm_above_tokens": 0}})
    server.add_file("doc1", "news.txt", b"The harbour workers strike on Monday; the ferries stop.")
    log = tmp_path / "bot.log"
    first = start_bot(cfg, server, log)
    second = db = None
    try:
        await server.wait_for("setMyCommands", timeout=60)
        db = await open_database(db_url, upgrade=False)   # the bot migrated it before it went online

        async def count(sql: str) -> int:
            return await db.fetchval(sql)

        for i in range(3):   # one batch: pushed before the fake answers the bot's next getUpdates
            server.push_message(CHAT, f"note {i}: the harbour strike starts on Monday, the ferries stop")
        server.push_message(CHAT, "/simulate what happens to the ferries?",
                            document={"file_id": "doc1", "file_name": "news.txt", "file_size": 56})
        server.push_message(CHAT, f"/ask {QUESTION}")
        await server.wait_for("sendMessage", lambda c: "started (job" in c.params["text"], timeout=90)
        await until(lambda: asks(llm) == 1, 90, "/ask to wait on the LLM", first)

        async def simulate_done_ask_started() -> bool:   # /simulate has ended (marked), /ask runs
            marks = [r[0] for r in await db.fetchall("SELECT command FROM telegram_inbox ORDER BY update_id")]
            return marks[3:] == ["done", "started"]
        await until(simulate_done_ask_started, 30, "/simulate marked done", first)
        kill_9(first)
        assert await count("SELECT count(*) FROM telegram_inbox") == 5   # the batch waits for /ask
        assert await count("SELECT count(*) FROM simulations") == 1

        second = start_bot(cfg, server, log)
        note = await server.wait_for("sendMessage", lambda c: "cut off by a restart" in c.params["text"], timeout=90)
        assert note.params["text"].startswith("⚠ /ask was cut off")

        async def inbox_empty() -> bool:
            return await count("SELECT count(*) FROM telegram_inbox") == 0
        await until(inbox_empty, 60, "the replayed batch to be handled", second)
        assert await count("SELECT count(*) FROM simulations") == 1          # /simulate did not run again
        assert sum("started (job" in t for t in texts(server)) == 1
        assert asks(llm) == 1                                               # /ask was not asked again
        assert sum("cut off by a restart" in t for t in texts(server)) == 1
        assert await count("SELECT count(*) FROM memory_messages") == 3     # plain messages: once each
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                assert stop(proc) == 0, log.read_text()[-3000:]
        if db is not None:
            await db.close()
        llm.stop()
        await server.stop()
