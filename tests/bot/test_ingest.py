"""Nothing lost, bursts kept up with: Telegram updates stored before they are confirmed, memory's
bounded batching queue, and commands that see every earlier message of their channel."""
from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from bot.adapters import telegram_adapter
from bot.adapters.base import serve
from bot.adapters.telegram_inbox import TelegramInbox
from bot.neutral import Incoming
from engine.db import open_database
from engine.memory.ingest_queue import IngestQueue
from tests.fakes.telegram_server import FakeTelegram
from tests.helpers.bot_process import kill_9, start_bot, stop, telegram_config
from tests.helpers.chat import RecordingReply, make_app
from tests.helpers.memory import Chat, close_engine, open_engine
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)
from tests.helpers.wait import until

TOKEN = "123:TEST"
pytestmark = pytest.mark.timeout(180)


@contextlib.asynccontextmanager
async def counting_bot(tmp_path, monkeypatch, db_url: str):
    """The bot in this process on a FakeTelegram, with a /count command that reports how many
    messages memory holds for its chat when it runs: (app, server, the adapter's serving task)."""
    monkeypatch.setenv("TG_TEST_TOKEN", TOKEN)
    server = await FakeTelegram(TOKEN).start()
    app = await make_app(tmp_path, db_url, telegram={
        "token_env": "TG_TEST_TOKEN", "base_url": server.base_url, "base_file_url": server.base_file_url,
        "poll_timeout_s": 1, "overall_max_rate": 1000})

    @app.commands.command("count", "messages remembered here")
    async def count(ctx):
        n = await app.db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=? AND channel=?",
                                  (ctx.scope, ctx.message.channel))
        await ctx.reply.send(f"{n} remembered")

    await app.start()
    stop_event = asyncio.Event()
    task = asyncio.create_task(serve(app.adapters.add(telegram_adapter.TelegramAdapter(app)), stop_event))
    try:
        await server.wait_for("setMyCommands")
        yield app, server, task
    finally:
        stop_event.set()
        await asyncio.wait_for(task, 30)
        await app.close()
        await server.stop()


@pytest.fixture
async def tg(tmp_path, monkeypatch, db_url):
    """``counting_bot`` on each backend: (app, server)."""
    async with counting_bot(tmp_path, monkeypatch, db_url) as (app, server, _task):
        yield app, server


def text_of(call) -> str:
    return call.params.get("text") or ""


async def rows(app) -> list[tuple[str, str]]:
    return [(r["channel"], r["text"]) for r in await app.db.fetchall(
        "SELECT channel, text FROM memory_messages ORDER BY id")]


async def test_a_command_sees_every_earlier_message_of_its_channel(tg):
    app, server = tg
    for i in range(40):
        server.push_message(-301, f"note {i} about the harbour strike and the ferry timetable")
        server.push_message(-302, f"other chat {i} talks about bread and ovens")
    server.push_message(-301, "/count")
    answer = await server.wait_for("sendMessage", lambda c: "remembered" in text_of(c), timeout=60)
    assert text_of(answer) == "40 remembered"
    texts = [t for ch, t in await rows(app) if ch == "-301"]
    assert texts == [f"note {i} about the harbour strike and the ferry timetable" for i in range(40)]  # in order


async def test_a_redelivered_update_is_stored_once(tg):
    app, server = tg
    for i in range(5):
        server.push_message(-310, f"message {i} on the new bus lanes downtown")
    server.push_message(-310, "/count")
    await server.wait_for("sendMessage", lambda c: text_of(c) == "5 remembered", timeout=60)
    await until(lambda: len(server.confirmed) >= 6, 30, "the updates to be confirmed")
    again = server.resend_confirmed(6)
    assert [u["update_id"] for u in again] == list(range(1, 7))
    server.push_message(-310, "message 5 on the new bus lanes downtown")
    server.push_message(-310, "/count")
    await server.wait_for("sendMessage", lambda c: text_of(c) == "6 remembered", timeout=60)
    async with asyncio.timeout(30):  # every update handled
        while await app.db.fetchval("SELECT count(*) FROM telegram_inbox"):
            await asyncio.sleep(0.05)
    answers = [text_of(c) for c in server.calls_of("sendMessage") if "remembered" in text_of(c)]
    assert answers == ["5 remembered", "6 remembered"]  # the first /count did not run again
    assert len(await rows(app)) == 6


async def test_updates_are_stored_before_confirmed_and_a_blocked_handler_stops_polling(db):
    """The inbox on its own, with the real Bot: while the handler waits (memory's queue is full),
    nothing more is fetched or confirmed; a crash then loses nothing, and the next start handles
    what was left, in order, before it polls again."""
    from telegram import Bot

    server = await FakeTelegram(TOKEN).start()
    bot = Bot(TOKEN, base_url=server.base_url)
    await bot.initialize()
    gate, handled = asyncio.Event(), []

    async def blocked(update, command, delivery):
        handled.append(update.update_id)
        await gate.wait()

    async def free(update, command, delivery):
        handled.append(update.update_id)

    async def no_messages_pending():
        return None

    def inbox(handle):
        return TelegramInbox(db, bot, handle, lambda update: None, no_messages_pending, 1, ["message"])

    try:
        for i in range(5):
            server.push_message(-500, f"message {i}")
        first = asyncio.create_task(inbox(blocked).run(asyncio.Event()))
        await until(lambda: handled == [1], 30, "the first update handed over")
        assert [r[0] for r in await db.fetchall("SELECT update_id FROM telegram_inbox ORDER BY update_id")] \
            == [1, 2, 3, 4, 5]  # all stored before any was confirmed
        server.push_message(-500, "message 5")
        for _ in range(20):
            await asyncio.sleep(0)
        assert server.confirmed == [] and handled == [1]  # no further getUpdates while the handler waits
        first.cancel()  # the process dies here
        await asyncio.gather(first, return_exceptions=True)

        handled.clear()
        stop_event = asyncio.Event()
        second = asyncio.create_task(inbox(free).run(stop_event))
        await until(lambda: len(handled) == 6, 30, "every update handled")
        assert handled == [1, 2, 3, 4, 5, 6]  # what was left first, in order; none twice
        await until(lambda: len(server.confirmed) == 6, 30, "every update confirmed")
        stop_event.set()
        await asyncio.wait_for(second, 30)
        assert await db.fetchall("SELECT update_id FROM telegram_inbox") == []
    finally:
        await bot.shutdown()
        await server.stop()


async def test_a_full_queue_makes_the_producer_wait_and_drops_nothing(db_url):
    db, engine = await open_engine(db_url)
    queue = IngestQueue(engine, max_pending=5, batch_max=4, batch_wait_ms=0)
    queue.start()
    chat = Chat()
    messages = [chat.msg(f"message number {i} about the city library opening hours") for i in range(12)]
    try:
        async with db.transaction():  # a long write elsewhere (an import) holds the database
            for m in messages[:9]:
                await queue.put(m)  # the worker took the first 4 and waits for the database
            await until(lambda: queue.pending == 5 and queue.batches == 0, 30, "a full queue")
            late = asyncio.create_task(queue.put(messages[9]))
            for _ in range(20):
                await asyncio.sleep(0)  # let every ready task run: the put must still wait
            assert not late.done() and queue.pending == 5
        await late
        for m in messages[10:]:
            await queue.put(m)
        await queue.settled()
        assert [r["message_id"] for r in await db.fetchall("SELECT message_id FROM memory_messages ORDER BY id")] \
            == [m.message_id for m in messages]
    finally:
        await queue.close()
        await close_engine(db, engine)


async def test_a_batch_spanning_scopes_is_written_in_one_transaction(tmp_path):
    db, engine = await open_engine(tmp_path / "t.sqlite3")
    statements: list[str] = []
    try:
        chats = [Chat(scope=f"test:{n}") for n in range(3)]
        batch = [chat.msg(f"message {i} of scope {chat.scope} about the night trains") for i in range(5)
                 for chat in chats]
        await db.conn.set_trace_callback(statements.append)
        await engine.ingest_many(batch)
        await db.conn.set_trace_callback(None)
        assert [s.split()[0].upper() for s in statements if s.split()[0].upper() in ("BEGIN", "COMMIT")] \
            == ["BEGIN", "COMMIT"]
        assert await db.fetchval("SELECT count(*) FROM memory_messages") == 15
    finally:
        await close_engine(db, engine)


async def test_a_command_waits_for_its_own_channel_only(tmp_path):
    db, engine = await open_engine(tmp_path / "q.sqlite3")
    queue = IngestQueue(engine, max_pending=100, batch_max=4, batch_wait_ms=0)
    queue.start()
    busy, quiet = Chat(channel="busy"), Chat(channel="quiet")
    try:
        async with db.transaction():  # hold the worker on its first batch
            for i in range(12):
                await queue.put(busy.msg(f"busy channel message {i} about the tram strike"))
            await until(lambda: queue.pending == 8, 30, "the first batch taken")
            for i in range(2):
                await queue.put(quiet.msg(f"quiet channel message {i} about gardening"))
            waiting = asyncio.create_task(queue.settled(quiet.scope, "quiet"))
            for _ in range(20):
                await asyncio.sleep(0)
            assert not waiting.done()
        await waiting
        stored_now = [r["channel"] for r in await db.fetchall("SELECT channel FROM memory_messages")]
        assert stored_now.count("quiet") == 2 and stored_now.count("busy") < 12  # it jumped the busy backlog
        await queue.settled()
        rows = await db.fetchall("SELECT channel, message_id FROM memory_messages ORDER BY id")
        assert [r["message_id"] for r in rows if r["channel"] == "busy"] == [f"test:1-{n}" for n in range(1, 13)]
    finally:
        await queue.close()
        await close_engine(db, engine)


async def test_kill_9_mid_burst_then_restart_loses_and_duplicates_nothing(tmp_path, db_url):
    """The real bot process on the Telegram fake, killed while confirmed updates were not yet in
    memory; after a restart every message is remembered exactly once (on both backends)."""
    server = await FakeTelegram(TOKEN).start()
    cfg = telegram_config(tmp_path, server, database=db_url)
    sent = []
    first = start_bot(cfg, server, tmp_path / "bot.log")
    db = None

    async def stored() -> list[tuple[str, int]]:
        rows = await db.fetchall("SELECT channel, message_id FROM memory_messages ORDER BY id")
        return [(channel, int(message_id)) for channel, message_id in rows]

    async def stored_count() -> int:
        return await db.fetchval("SELECT count(*) FROM memory_messages")
    try:
        await server.wait_for("setMyCommands", timeout=60)
        db = await open_database(db_url, upgrade=False)   # the bot migrated it before it went online
        for i in range(400):
            chat = -400 - i % 5
            sent.append((str(chat), server.push_message(chat, f"burst message {i} from chat {chat}")["message_id"]))

        # kill while Telegram has confirmed updates that memory has not stored yet
        async def memory_behind() -> bool:
            return len(server.confirmed) - await stored_count() >= 50
        await until(memory_behind, 90, "confirmed updates ahead of memory", first)
        kill_9(first)
        at_kill = await stored_count()
        assert len(server.confirmed) > at_kill
        second = start_bot(cfg, server, tmp_path / "bot.log")
        try:
            async def all_stored() -> bool:
                return await stored_count() >= len(sent)
            await until(all_stored, 120, "every message to be stored", second)
            await until(lambda: len(server.confirmed) == len(sent), 30, "every update confirmed", second)
        finally:
            assert stop(second) == 0, (tmp_path / "bot.log").read_text()[-3000:]
        got = await stored()
        assert sorted(got) == sorted(sent)  # none lost, none twice
        for chat in {c for c, _ in sent}:  # each chat in order
            ids = [m for c, m in got if c == chat]
            assert ids == sorted(ids)
    finally:
        if first.poll() is None:
            kill_9(first)
        if db is not None:
            await db.close()
        await server.stop()


async def test_a_message_that_arrives_while_postgresql_restarts_is_remembered_once_it_is_back(
        tmp_path, restartable_pg):  # noqa: F811
    """Before it is queued, a message's channel setting is read (is memory on here?): that read
    waits for the database too, rather than dropping the message."""
    app = await make_app(tmp_path, await restartable_pg.fresh_database())
    await app.start()
    try:
        restarting = await restartable_pg.going_down(3.0)
        await app.dispatch(Incoming("console", "console:local", "console", "me", "me",
                                    "the night ferry leaves at ten", message_id="m1"), RecordingReply())
        await restarting
        await asyncio.wait_for(app.settled(), 60)
        assert await app.db.fetchval("SELECT count(*) FROM memory_messages WHERE message_id='m1'") == 1
    finally:
        await app.close()


async def test_a_command_sent_when_telegram_is_back_is_answered_within_seconds(tg):
    """Telegram's side down for a while (getUpdates answers 502): polling tries again every
    ``RETRY_MAX_S`` at most, so a command sent the moment it is back waits seconds, not the half
    minute a longer backoff would reach."""
    app, server = tg
    server.down = True
    await until(lambda: server.refused_polls >= 6, 60, "six refused polls")
    server.down = False
    sent = time.monotonic()
    server.push_message(-320, "/count")
    await server.wait_for("sendMessage", lambda c: "remembered" in text_of(c), timeout=60)
    assert time.monotonic() - sent < 8


async def test_telegram_polling_rides_out_a_postgresql_restart(tmp_path, monkeypatch, restartable_pg):  # noqa: F811
    """A PostgreSQL restart while updates arrive: the batch fetched meanwhile waits for the
    database (unconfirmed) and polling goes on; every message, from before, during and after the
    outage, is stored, and a command after it is answered."""
    async with counting_bot(tmp_path, monkeypatch, await restartable_pg.fresh_database()) as (app, server, task):
        texts = [f"message {i} about the tram depot and its night shifts" for i in range(12)]
        for text in texts[:4]:
            server.push_message(-320, text)
        await until(lambda: len(server.confirmed) >= 4, 30, "the first messages to be confirmed")
        restarting = await restartable_pg.going_down(4.0)
        for text in texts[4:8]:   # fetched while the database is away
            server.push_message(-320, text)
        await restarting
        assert not task.done(), "the Telegram adapter stopped during the outage"
        for text in texts[8:]:
            server.push_message(-320, text)
        server.push_message(-320, "/count")
        answer = await server.wait_for("sendMessage", lambda c: "remembered" in text_of(c), timeout=90)
        assert text_of(answer) == "12 remembered"
        assert [t for _, t in await rows(app)] == texts
        assert not task.done()
