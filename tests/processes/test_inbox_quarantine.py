"""No crash loop: a Telegram update whose handling the bot died in twice is set aside, with a
note to its chat, instead of being handed over at every start. The inbox on its own (both
backends), then the real bot process killed with SIGKILL twice while the report agent answers a
question asked by replying to its report (a command cut off is not run again, bot/once.py, but a
question is asked again until answered: what could come back at every start)."""
from __future__ import annotations

import asyncio
import logging
import sqlite3
import time

import pytest
from telegram import Bot

from bot.adapters.telegram_inbox import SET_ASIDE_NOTE, TelegramInbox
from bot.app import App
from bot.features.simulation.access import simulations
from engine.config import load_config
from tests.engine.sim.report.test_chat import FEATURES, prepare
from tests.fakes.openai_server import Raw, completion
from tests.fakes.telegram_server import BOT_USER, USER_ID, FakeTelegram
from tests.helpers.bot_process import kill_9, start_bot, stop, telegram_config
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.simdata import sample_simulation
from tests.helpers.wait import until

TOKEN = "123:TEST"
CHAT = -800
pytestmark = pytest.mark.timeout(240)


def notes(server, chat: int) -> list:
    return [c for c in server.calls_of("sendMessage")
            if int(c.params["chat_id"]) == chat and c.params["text"] == SET_ASIDE_NOTE]


async def test_an_update_left_over_by_two_runs_is_set_aside_with_a_note(db, caplog):
    """Run 1 dies while /boom runs (the whole batch is left over); run 2 hands the left-over
    updates over one at a time and dies in /boom again; run 3 sets /boom aside, tells its chat,
    and handles the rest. A run 'dies' here by being cancelled with its handler still waiting."""
    server = await FakeTelegram(TOKEN).start()
    bot = Bot(TOKEN, base_url=server.base_url)
    await bot.initialize()
    never = asyncio.Event()
    handled: list[str] = []

    async def handle(update, command, delivery):
        handled.append(update.effective_message.text)
        if update.effective_message.text == "/boom":
            await never.wait()

    def command_of(update):
        text = update.effective_message.text
        return text if text.startswith("/") else None

    async def nothing_pending():
        return None

    inboxes = []

    def inbox() -> TelegramInbox:
        inboxes.append(TelegramInbox(db, bot, handle, command_of, nothing_pending, 1, ["message"]))
        return inboxes[-1]

    runs = []
    try:
        server.push_message(CHAT, "before")
        boom = server.push_message(CHAT, "/boom")
        server.push_message(CHAT, "after")
        runs.append(asyncio.create_task(inbox().run(asyncio.Event())))
        await until(lambda: sorted(handled) == ["/boom", "after", "before"], 30, "the batch handed over")
        runs[-1].cancel()

        runs.append(asyncio.create_task(inbox().run(asyncio.Event())))
        await until(lambda: handled.count("/boom") == 2, 30, "/boom handed over again")
        assert handled[3:] == ["before", "/boom"]  # one at a time: "after" waits for /boom
        runs[-1].cancel()
        assert [tuple(r) for r in await db.fetchall("SELECT update_id, attempts FROM telegram_inbox "
                                                    "ORDER BY update_id")] == [(2, 2), (3, 1)]
        # ("before" was done with before /boom ran alone)

        stop_event = asyncio.Event()
        caplog.set_level(logging.WARNING, logger="bot.adapters.telegram_inbox")
        runs.append(asyncio.create_task(inbox().run(stop_event)))
        note = (await server.wait_for("sendMessage", lambda c: c.params["text"] == SET_ASIDE_NOTE)).params
        assert int(note["chat_id"]) == CHAT and note["reply_parameters"]["message_id"] == boom["message_id"]
        await until(lambda: handled.count("after") == 2, 30, "the update after /boom handled")
        await until(lambda: db.fetchval("SELECT count(*) = 0 FROM telegram_inbox"), 30, "an empty inbox")
        server.push_message(CHAT, "later")
        await until(lambda: handled[-1] == "later", 30, "polling again")
        assert handled.count("/boom") == 2 and len(notes(server, CHAT)) == 1
        set_aside = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
        assert len(set_aside) == 1 and "(/boom in chat -800)" in set_aside[0]   # its command, not its text
        stop_event.set()
        await asyncio.wait_for(runs[-1], 30)
    finally:
        for run in runs:
            run.cancel()
        never.set()  # the handlers of the runs that 'died' end now
        await asyncio.gather(*runs, return_exceptions=True)
        for each in inboxes:
            await each.close()
        await bot.shutdown()
        await server.stop()


REPORT_MESSAGE = 777   # the report's summary, as the bot posted it before the test starts
QUESTION = "what did the ferry crews say about the fare hike?"


def asks(server) -> int:
    return sum((r["messages"][0].get("content") or "").startswith("You are the report agent")
               for r in server.requests)


def inbox_rows(db_path) -> int:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT count(*) FROM telegram_inbox").fetchone()[0]
    finally:
        conn.close()


async def test_a_question_the_bot_was_killed_in_twice_is_not_asked_a_third_time(tmp_path, tmp_path_factory,
                                                                                 openai_server):  # noqa: F811
    openai_server.responder = lambda body: (Raw(body=completion("too late"), delay=120)
                                            if body["messages"][0]["content"].startswith("You are the report agent")
                                            else "ok")
    server = await FakeTelegram(TOKEN).start()
    cfg = telegram_config(tmp_path, server, sections={
        "llm": {"base_url": openai_server.base_url, "model": "m", "retry_max_wait_s": 1}})
    app = await App.create(load_config(cfg), FEATURES)
    scope = f"telegram:{CHAT}"
    await prepare(app, sample_simulation(tmp_path_factory, tmp_path), scope, str(CHAT), starter=str(USER_ID))
    await simulations(app).note_report_messages("sim1", scope, str(CHAT), [str(REPORT_MESSAGE)])
    db_path = app.config.db_path
    await app.close()
    log = tmp_path / "bot.log"
    procs = []
    try:
        procs.append(start_bot(cfg, server, log))
        await server.wait_for("setMyCommands", timeout=60)
        for hour in ("seven", "eight", "nine"):
            server.push_message(CHAT, f"the ferry to the island leaves at {hour}")
        replied = {"message_id": REPORT_MESSAGE, "date": int(time.time()), "from": BOT_USER,
                   "chat": {"id": CHAT, "type": "supergroup", "title": "Group"}, "text": "📊 Report"}
        question = server.push_message(CHAT, QUESTION, reply_to=replied)
        for attempt in (1, 2):
            await until(lambda attempt=attempt: asks(openai_server) == attempt, 90,
                        f"the report agent's LLM call, attempt {attempt}", procs[-1])
            kill_9(procs[-1])
            assert inbox_rows(db_path) >= 1
            procs.append(start_bot(cfg, server, log))

        note = await server.wait_for("sendMessage", lambda c: c.params["text"] == SET_ASIDE_NOTE, timeout=90)
        assert note.params["reply_parameters"]["message_id"] == question["message_id"]
        server.push_message(CHAT, "/recall ferry")  # the bot goes on with what comes next
        answer = await server.wait_for("sendMessage", lambda c: "ferry" in c.params["text"], timeout=60)
        assert int(answer.params["chat_id"]) == CHAT
        await until(lambda: inbox_rows(db_path) == 0, 30, "an empty inbox", procs[-1])
        assert asks(openai_server) == 2 and len(notes(server, CHAT)) == 1
        assert stop(procs[-1]) == 0, log.read_text()[-3000:]
        set_aside = [line for line in log.read_text().splitlines() if "set aside" in line]
        assert len(set_aside) == 1 and "(a message in chat -800)" in set_aside[0] and "ferry" not in set_aside[0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_9(proc)
        await server.stop()
