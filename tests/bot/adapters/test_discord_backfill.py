"""Discord backfill through the real discord.py: what was said while the bot was down or
disconnected is read back from channel history, in order, for remembered channels only."""
from __future__ import annotations

import asyncio

import pytest

from bot.adapters.discord_backfill import remembered_channels
from engine.memory import MemoryMessage
from tests.fakes.discord_server import CHANNEL, GUILD, STAFF_ROLE, private_to
from tests.helpers.chat import make_app
from tests.helpers.discord import fake, start_bot, stop_bot, texts, wait_for_texts  # noqa: F401  (fake: the fixture)
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(120)
SCOPE = f"discord:{GUILD}"
QUIET = "3001"   # a second channel, switched off with /memory off


async def test_backfill_after_downtime_fills_the_gap_in_order(tmp_path, monkeypatch, fake, db_url):
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        for i in range(3):
            await fake.message(f"live message {i} about the river ferry timetable")
        await fake.message("a message in the quiet channel about bread", channel=QUIET)
        await wait_for_texts(app, 3)
        await wait_for_texts(app, 1, QUIET)
        await app.set_setting(SCOPE, QUIET, "memory", "off")
        last_seen = fake.history[CHANNEL][-1]["id"]
    finally:
        await stop_bot(app, stop, task)

    for i in range(5):  # said while the bot was down
        fake.missed_message(f"missed message {i} about the river ferry timetable")
    fake.missed_message("said in the quiet channel while the bot was down", channel=QUIET)
    fake.missed_message("a bot's own post is not remembered", author_id="1000")
    fake.history[CHANNEL][-1]["author"]["bot"] = True

    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        await wait_for_texts(app, 8)
        assert await texts(app) == [f"live message {i} about the river ferry timetable" for i in range(3)] + [
            f"missed message {i} about the river ferry timetable" for i in range(5)]
        reads = fake.calls_to("GET", f"/channels/{CHANNEL}/messages")
        assert reads and reads[0].query["after"] == last_seen
        assert not fake.calls_to("GET", f"/channels/{QUIET}/messages")  # memory is off there
        assert await texts(app, QUIET) == ["a message in the quiet channel about bread"]
    finally:
        await stop_bot(app, stop, task)


async def test_backfill_after_a_reconnect(tmp_path, monkeypatch, fake):
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True,
                                          backfill_max_messages=3)
    try:
        await fake.message("live message before the network hiccup about the harbour")
        await wait_for_texts(app, 1)
        for i in range(4):  # the gateway events of these were lost
            fake.missed_message(f"missed during the hiccup {i} about the harbour")
        await fake.drop_connections()
        await wait_for_texts(app, 4)
        assert fake.resumed >= 1
        # bounded: the oldest 3 of the 4 missed messages, in order
        assert await texts(app) == ["live message before the network hiccup about the harbour"] + [
            f"missed during the hiccup {i} about the harbour" for i in range(3)]
    finally:
        await stop_bot(app, stop, task)


async def test_backfill_starts_after_the_last_stored_snowflake_whatever_else_is_stored(tmp_path, db_url):
    """Real snowflakes need 64 bits, and imported history stores ids that are none (0 then)."""
    app = await make_app(tmp_path, db_url)
    try:
        await app.memory.ingest_many([
            MemoryMessage(SCOPE, CHANNEL, message_id, "ann", f"message {n} about the harbour ferry")
            for n, message_id in enumerate(["10001", "1312345678901234567", "imported-7"])] + [
            MemoryMessage(SCOPE, "3002", "imported-8", "ann", "an imported message about bread"),
            MemoryMessage("telegram:5", "5", "99", "ann", "a telegram message about trams")])
        assert await remembered_channels(app) == [(SCOPE, CHANNEL, 1312345678901234567), (SCOPE, "3002", 0)]
    finally:
        await app.close()


async def test_a_reply_to_a_report_read_back_from_history_is_remembered_not_answered(tmp_path, monkeypatch, fake):
    """Backfill never runs a command: a question asked by replying to a report while the bot was
    away is remembered, and no report agent answers it late (nor again, for one answered before)."""
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True)
    try:
        await fake.message("live message about the harbour ferry report")
        await wait_for_texts(app, 1)
        report = fake.next_id()   # a report message the bot posted
        await app.db.execute("INSERT INTO simulations(id, scope, channel, requirement, folder, created_at)"
                             " VALUES ('sim1', ?, ?, 'what next?', ?, '2026-01-01')",
                             (SCOPE, CHANNEL, str(tmp_path / "sim1")))
        await app.sims.note_report_messages("sim1", SCOPE, CHANNEL, [report])
    finally:
        await stop_bot(app, stop, task)
    fake.missed_message("what did the ferry crews say?", reply_to=report)
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True)
    try:
        await wait_for_texts(app, 2)
        adapter = app.adapters._by_platform["discord"]
        # the backfill ended: it handed over everything it read
        await until(lambda: adapter.backfill.runs >= 1, 30, "the backfill to end")
        await app.drain()
        assert (await texts(app))[-1] == "what did the ferry crews say?"
        assert not fake.calls_to("POST", f"/channels/{CHANNEL}/messages")
        assert not fake.calls_to("POST", f"/channels/{CHANNEL}/typing")
    finally:
        await stop_bot(app, stop, task)


async def test_a_live_message_stored_before_the_backfill_does_not_hide_what_was_missed(tmp_path, monkeypatch, fake,
                                                                                      db_url):
    """discord.py announces the connection (on_ready) seconds after the servers arrived, and live
    messages are handled meanwhile: the backfill still starts from what was stored before this
    connection, not after a live message that got in first."""
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        await fake.message("live message before the restart about the river ferry")
        await wait_for_texts(app, 1)
    finally:
        await stop_bot(app, stop, task)
    for i in range(3):   # said while the bot was down
        fake.missed_message(f"missed message {i} about the river ferry")
    fake.identified.clear()

    starting = asyncio.create_task(start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url))
    await asyncio.wait_for(fake.identified.wait(), 60)
    await fake.message("live message after the restart about the river ferry")   # before on_ready
    app, stop, task, *_ = await starting
    try:
        await wait_for_texts(app, 5)
        assert sorted(await texts(app)) == sorted(
            ["live message before the restart about the river ferry",
             "live message after the restart about the river ferry"]
            + [f"missed message {i} about the river ferry" for i in range(3)])
    finally:
        await stop_bot(app, stop, task)


async def test_a_channel_with_nothing_stored_is_read_back_after_a_reconnect(tmp_path, monkeypatch, fake, db_url):
    """A channel's first message, said while the gateway was down, is read back although memory
    held nothing of that channel (a later live message would otherwise move its start past it);
    a channel the bot cannot read is not asked for."""
    new_room = fake.add_channel("new-room")
    staff_room = fake.add_channel("staff-room", private_to(STAFF_ROLE))
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        await fake.message("live message before the hiccup about the harbour")
        await wait_for_texts(app, 1)
        fake.missed_message("the first words ever said in the new room, about the harbour", channel=new_room)
        fake.missed_message("said among staff during the hiccup", channel=staff_room)
        await fake.drop_connections()
        await until(lambda: fake.resumed >= 1, 30, "the bot to resume")
        await fake.message("a live message in the new room after the hiccup", channel=new_room)
        await wait_for_texts(app, 2, new_room)
        assert await texts(app, new_room) == ["the first words ever said in the new room, about the harbour",
                                              "a live message in the new room after the hiccup"]
        assert not fake.calls_to("GET", f"/channels/{staff_room}/messages")
    finally:
        await stop_bot(app, stop, task)


async def test_a_reconnect_while_postgresql_restarts_still_reads_back_what_was_missed(
        tmp_path, monkeypatch, fake, restartable_pg):  # noqa: F811
    """The gateway comes back while the database cannot be reached: the backfill waits for the
    database instead of failing, and what was said meanwhile, live or missed, is all stored."""
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True,
                                          db_url=await restartable_pg.fresh_database())
    try:
        await fake.message("live message before the outage about the harbour")
        await wait_for_texts(app, 1)
        restarting = await restartable_pg.going_down(4.0)
        fake.missed_message("missed while the gateway and the database were away, about the harbour")
        await fake.drop_connections()
        await until(lambda: fake.resumed >= 1, 30, "the bot to resume")
        await fake.message("live message during the outage about the harbour")
        await restarting
        await fake.message("live message after the outage about the harbour")
        await wait_for_texts(app, 4, timeout=60)
        assert sorted(await texts(app)) == sorted([
            "live message before the outage about the harbour",
            "missed while the gateway and the database were away, about the harbour",
            "live message during the outage about the harbour", "live message after the outage about the harbour"])
    finally:
        await stop_bot(app, stop, task)


async def test_a_channel_a_crash_left_nothing_of_is_read_back_from_the_servers_first_stored_message(
        tmp_path, monkeypatch, fake, db_url):
    """A bot killed behind a backlog may have stored nothing of a busy channel, while other
    channels hold later messages: after the restart that channel is read back from the first
    message memory holds of its server, not from the newest, so its early messages come back."""
    busy = fake.add_channel("busy-room")
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        await fake.message("the first stored message of the server, about the harbour")
        await wait_for_texts(app, 1)
        for i in range(3):   # received, never stored: still queued when the bot died
            fake.missed_message(f"early message {i} in the busy room", channel=busy)
        await fake.message("a later message stored before the crash, about the harbour")
        await wait_for_texts(app, 2)
    finally:
        await stop_bot(app, stop, task)
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True, db_url=db_url)
    try:
        await wait_for_texts(app, 3, busy)
        assert await texts(app, busy) == [f"early message {i} in the busy room" for i in range(3)]
    finally:
        await stop_bot(app, stop, task)
