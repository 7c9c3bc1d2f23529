"""At most once (bot/once.py): the marks on Telegram's inbox rows, without the processes, on both
backends; and the marks with the inbox's set-aside of what the bot died in twice
(bot/adapters/telegram_inbox.py): a finished command is skipped, a cut-off one announced once, one
left over twice set aside, one never begun run."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest
from telegram import Bot

from bot.adapters.telegram_inbox import SET_ASIDE_NOTE, InboxDelivery, TelegramInbox
from bot.commands.registry import parse_command
from bot.neutral import Incoming
from bot.once import interrupted_note
from tests.fakes.telegram_server import USER_ID, FakeTelegram
from tests.helpers.chat import RecordingReply, make_app
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(120)
TOKEN = "123:TEST"
CHAT = -800


def tick_command(app) -> list[str]:
    """Register /tick, which says "tick"; returns the ids of the messages it ran for."""
    runs: list[str] = []

    @app.commands.command("tick", "counts its runs")
    async def tick(ctx):
        runs.append(ctx.message.message_id)
        await ctx.reply.send("tick")

    return runs


async def test_a_command_runs_once_per_delivery_and_a_question_until_answered(tmp_path, db_url):
    """A finished command handed over again is skipped in silence, a cut-off one is announced once
    and not run, and a question (a reply that stands for a command) cut off is asked again, then
    never twice."""
    app = await make_app(tmp_path, db_url)
    runs = tick_command(app)

    async def question(msg: Incoming) -> Incoming | None:
        return dataclasses.replace(msg, command="tick", options={}) if msg.reply_to == "report" else None
    app.reply_routes.append(question)

    async def delivered(update_id: int, text: str, reply_to: str = "") -> RecordingReply:
        """Update ``update_id`` handed over (again) as the inbox does: with its row's mark."""
        mark = await app.db.fetchval("SELECT command FROM telegram_inbox WHERE bot_id=1 AND update_id=?",
                                     (update_id,))
        reply = RecordingReply()
        msg = Incoming("telegram", "telegram:5", "5", "7", "ann", text, message_id=str(update_id),
                       reply_to=reply_to, delivery=InboxDelivery(app.db, 1, update_id, mark))
        task = await app.dispatch(msg, reply)
        if task is not None:
            await task
        return reply

    await app.start()
    try:
        await app.db.executemany("INSERT INTO telegram_inbox(bot_id, update_id, payload, received_at) "
                                 "VALUES (1, ?, '{}', '2026-01-01')", [(1,), (2,), (3,)])
        assert (await delivered(1, "/tick")).log == [("send", "tick")]
        assert (await delivered(1, "/tick")).log == []                    # done: skipped in silence
        assert runs == ["1"]

        await app.db.execute("UPDATE telegram_inbox SET command='started' WHERE update_id=2")  # a crash mid-command
        note = (await delivered(2, "/tick")).log
        assert note == [("send", "⚠ /tick was cut off by a restart of the bot before it finished, and it is not "
                                 "run again, so that nothing is done twice. Check what it did (/jobs, /sims) and "
                                 "send it again if it is still needed.")]
        assert (await delivered(2, "/tick")).log == []                    # said once
        assert runs == ["1"]

        await app.db.execute("UPDATE telegram_inbox SET command='started' WHERE update_id=3")  # cut off mid-answer
        assert (await delivered(3, "what about the ferries?", reply_to="report")).log == [("send", "tick")]
        assert (await delivered(3, "what about the ferries?", reply_to="report")).log == []
        assert runs == ["1", "3"]
    finally:
        await app.close()


def update(update_id: int, text: str) -> dict:
    """An update as the Bot API sends it: ``text`` from the fake's user in the group ``CHAT``."""
    message = {"message_id": 100 + update_id, "date": int(time.time()), "text": text,
               "chat": {"id": CHAT, "type": "supergroup", "title": "Group"},
               "from": {"id": USER_ID, "is_bot": False, "first_name": "Ann"}}
    if text.startswith("/"):
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
    return {"update_id": update_id, "message": message}


async def test_left_over_updates_are_skipped_announced_set_aside_or_run_by_their_marks(tmp_path, db_url):
    """What a previous run left in the inbox, by (times handed over, command mark): a finished
    command is skipped in silence even when handed over twice (it was handled: never set aside),
    a cut-off one is announced once, one cut off twice (the bot died in it again) is set aside
    with the inbox's note and not announced, and one that never began runs."""
    app = await make_app(tmp_path, db_url)
    runs = tick_command(app)
    server = await FakeTelegram(TOKEN).start()
    bot = Bot(TOKEN, base_url=server.base_url)
    await bot.initialize()
    chat = RecordingReply()

    async def handle(found, command, delivery):
        message = found.effective_message
        return await app.dispatch(Incoming("telegram", f"telegram:{CHAT}", str(CHAT), str(USER_ID), "Ann",
                                           message.text, message_id=str(message.message_id),
                                           delivery=delivery), chat)

    async def nothing_pending():
        return None

    await app.start()
    stop = asyncio.Event()
    inbox = TelegramInbox(app.db, bot, handle, lambda found: parse_command(found.effective_message.text),
                          nothing_pending, 1, ["message"])
    run = None
    try:
        left = [(1, "/tick finished", 1, "done"), (2, "/tick finished twice", 2, "done"),
                (3, "/tick cut off", 1, "started"), (4, "/tick cut off twice", 2, "started"),
                (5, "/tick", 1, None)]
        await app.db.executemany(
            "INSERT INTO telegram_inbox(bot_id, update_id, payload, received_at, attempts, command) "
            "VALUES (?,?,?,'2026-01-01',?,?)",
            [(bot.id, uid, json.dumps(update(uid, text)), attempts, mark) for uid, text, attempts, mark in left])
        run = asyncio.create_task(inbox.run(stop))
        await until(lambda: app.db.fetchval("SELECT count(*) = 0 FROM telegram_inbox"), 60, "an empty inbox")
        assert runs == ["105"]   # the update never begun
        assert chat.log == [("send", f"⚠ {interrupted_note('/tick')}"), ("send", "tick")]
        notes = [c.params for c in server.calls_of("sendMessage") if c.params["text"] == SET_ASIDE_NOTE]
        assert len(notes) == 1 and notes[0]["reply_parameters"]["message_id"] == 104
        stop.set()
        await asyncio.wait_for(run, 30)
    finally:
        if run is not None and not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
        await inbox.close()
        await bot.shutdown()
        await server.stop()
        await app.close()
