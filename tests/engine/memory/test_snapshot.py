"""What a simulation's brief may take from memory (engine.memory.snapshot), on SQLite and
PostgreSQL: a snapshot reads exactly as its viewer reads (a restricted channel's world and
messages are not there for the public viewer), leaves out members who opted out, with the beliefs
resting on their words; ``still_held`` tells which taken lines memory still holds; and every way of
forgetting tells the ``on_forget`` listeners the ids that went."""
from __future__ import annotations

import pytest

from engine.memory.audience import Viewer
from tests.helpers.memory import Chat, add_belief, close_engine, open_engine, said

pytestmark = pytest.mark.timeout(300)
SCOPE = "test:snapshot"
STAFF = "900"            # the audience of the staff channel


async def seeded(engine, db):
    """#general: Ann and Bob about the ferry; #staff (audience 900): Cleo about the budget; beliefs
    on Ann's message and on Bob's."""
    chat = Chat(SCOPE)
    await engine.ingest(said(chat, "the ferry timetable changes when the water is high", "Ann Lee", "a1"))
    await engine.ingest(said(chat, "the ferry was late again because of the high water", "Bob", "b1"))
    secret = said(chat, "staff only: the ferry budget is cut by half", "Cleo", "c1", channel="staff")
    secret.audience = STAFF
    await engine.ingest(secret)
    rows = await db.fetchall("SELECT id, world_id, author_id FROM memory_messages ORDER BY id")
    ann, bob, cleo = rows
    beliefs = {"ann": await add_belief(engine, db, SCOPE, ann["world_id"], "the ferry", "changes with high water",
                                       [ann["id"]]),
               "bob": await add_belief(engine, db, SCOPE, bob["world_id"], "the ferry", "was late", [bob["id"]]),
               "cleo": await add_belief(engine, db, SCOPE, cleo["world_id"], "the budget", "is cut", [cleo["id"]])}
    return rows, beliefs


async def test_a_snapshot_reads_as_its_viewer_without_members_who_opted_out(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.3)
    try:
        (ann, bob, cleo), beliefs = await seeded(engine, db)
        public = Viewer(SCOPE)
        snap = await engine.snapshot(public, channel="general")
        assert [(m.author, m.id) for m in snap.messages] == [("Ann Lee", ann["id"]), ("Bob", bob["id"])]
        assert {b.id for b in snap.beliefs} == {beliefs["ann"], beliefs["bob"]} and snap.left_out == 0
        assert next(b for b in snap.beliefs if b.id == beliefs["bob"]).authors == ("Bob",)
        # the staff channel's messages and world are not there for the public viewer
        assert not await engine.snapshot(public, channel="staff")
        assert not await engine.snapshot(public, world_id=cleo["world_id"])
        staff = await engine.snapshot(Viewer(SCOPE, STAFF), world_id=cleo["world_id"])
        assert [m.text for m in staff.messages] == ["staff only: the ferry budget is cut by half"]
        assert [b.id for b in staff.beliefs] == [beliefs["cleo"]]

        await engine.opt_out(SCOPE, "b1", "Bob")
        snap = await engine.snapshot(public, channel="general")
        assert [m.author for m in snap.messages] == ["Ann Lee"] and snap.left_out == 1
        assert [b.id for b in snap.beliefs] == [beliefs["ann"]]   # nor the belief resting on Bob's words
        held = await engine.still_held(SCOPE, {ann["id"]: snap.messages[0].ts, bob["id"]: snap.messages[0].ts},
                                       {beliefs["ann"]: ("the ferry said changes with high water", (ann["id"],)),
                                        beliefs["bob"]: ("the ferry said was late", (bob["id"],))})
        assert held == ({ann["id"]}, {beliefs["ann"]})   # Bob opted out; a wrong time is not the message taken
        await engine.opt_in(SCOPE, "b1")
        assert (await engine.snapshot(public, channel="general", limit=1)).more
    finally:
        await close_engine(db, engine)


async def test_every_way_of_forgetting_tells_the_listeners_what_went(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.3)
    told = []

    async def listener(forgotten):
        told.append(forgotten)

    engine.on_forget.append(listener)
    try:
        (ann, bob, cleo), beliefs = await seeded(engine, db)
        await engine.forget_belief(SCOPE, beliefs["cleo"])
        await engine.forget_messages(SCOPE, [bob["id"]])
        await engine.forget_author(SCOPE, "a1")
        await engine.forget_author(SCOPE, "nobody")   # nothing went: nobody is told
        await engine.forget(SCOPE, "staff")
        assert [(f.scope, set(f.messages), set(f.beliefs)) for f in told] == [
            (SCOPE, set(), {beliefs["cleo"]}), (SCOPE, {bob["id"]}, {beliefs["bob"]}),
            (SCOPE, {ann["id"]}, {beliefs["ann"]}), (SCOPE, {cleo["id"]}, set())]
        chat = Chat(SCOPE)
        await engine.ingest(said(chat, "a new message about the ferry timetable", "Dee", "d1"))
        last = await db.fetchval("SELECT max(id) FROM memory_messages")
        await engine.forget(SCOPE)
        assert set(told[-1].messages) == {last}
    finally:
        await close_engine(db, engine)
