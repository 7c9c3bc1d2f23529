"""Audiences inside one scope, in the memory engine itself: partitioned routing, viewers in every
query, channels moving between audiences with their beliefs, and messages with no audience of
their own (imports) following the channel's recorded one."""
from __future__ import annotations

import json
import re
from datetime import timedelta

from engine.config import LLMSection
from engine.llm import LLMClient
from engine.memory.audience import Viewer
from engine.memory.extraction import SYSTEM_PROMPT
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.memory import T0, Chat, close_engine, open_engine

SCOPE = "discord:1"
STAFF = "900"   # the audience of the restricted channel 'staff' (its own id)


def team_meets(body: dict):
    """Every batch states the same fact, so one belief rests on messages of several channels."""
    if not body["messages"][0]["content"].startswith(SYSTEM_PROMPT):
        return json.dumps({"name": "topic"}) if "name chat topics" in body["messages"][0]["content"] else "answer"
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", body["messages"][1]["content"], re.M)]
    return json.dumps({"beliefs": [{"subject": "the team", "predicate": "meets on", "object": "thursday",
                                    "confidence": 0.8, "exclusive": False, "sources": numbers}]})


async def test_audiences_never_share_a_world_and_viewers_see_only_theirs(db_url):
    db, engine = await open_engine(db_url)
    chat = Chat(SCOPE)
    same = "the quarterly budget review happens in the big meeting room"
    public = await engine.ingest(chat.msg(same, channel="general"))
    hidden = await engine.ingest(_with(chat.msg(same + " again", channel="staff"), STAFF))
    assert public.world_id != hidden.world_id  # the same words, yet two worlds
    await engine.maintain(SCOPE)  # near-identical worlds merge only within an audience
    everyone, staff = Viewer(SCOPE), Viewer(SCOPE, STAFF)
    assert [w.id for w in await engine.worlds(everyone)] == [public.world_id]
    assert [w.id for w in await engine.worlds(SCOPE)] == [public.world_id]  # a bare scope: the public viewer
    assert {w.id for w in await engine.worlds(staff)} == {public.world_id, hidden.world_id}
    assert {w.id for w in await engine.worlds(Viewer(SCOPE, "901"))} == {public.world_id}
    assert {w.id for w in await engine.worlds(Viewer.operator(SCOPE))} == {public.world_id, hidden.world_id}
    assert await engine.world(everyone, hidden.world_id) is None
    assert (await engine.world(staff, hidden.world_id))[0].audience == STAFF
    found = await engine.recall(everyone, same + " again")
    assert found.world.id == public.world_id and all(e.channel == "general" for e in found.evidence)
    assert (await engine.recall(staff, same + " again")).world.id == hidden.world_id
    digest = await engine.digest(everyone, T0 - timedelta(days=1))
    assert [w.id for w in digest.new_worlds] == [public.world_id]
    await close_engine(db, engine)


async def test_a_channel_changing_audience_takes_its_messages_and_beliefs_along(db_url):
    with FakeOpenAI(team_meets) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, extract_every_n=1000, extract_every_s=600)
        chat = Chat(SCOPE)
        for channel in ("general", "staff"):
            for text in ("the team meets on thursday in the big room", "our team meeting is thursday at ten"):
                await engine.ingest(chat.msg(text, channel=channel))
        await engine.flush()
        (belief,) = await db.fetchall("SELECT id, world_id, sources FROM beliefs")
        assert len(json.loads(belief["sources"])) == 4  # both channels' messages

        assert await engine.set_audiences(SCOPE, {"general": "", "staff": STAFF}) == ["general", "staff"]
        assert await engine.set_audiences(SCOPE, {"general": "", "staff": STAFF}) == []  # nothing new
        rows = await db.fetchall("SELECT m.channel, w.audience FROM memory_messages m JOIN worlds w ON w.id=m.world_id")
        assert {(r["channel"], r["audience"]) for r in rows} == {("general", ""), ("staff", STAFF)}
        beliefs = await db.fetchall("SELECT b.sources, w.audience FROM beliefs b JOIN worlds w ON w.id=b.world_id")
        staff_ids = {r["id"] for r in await db.fetchall("SELECT id FROM memory_messages WHERE channel='staff'")}
        by_audience = {r["audience"]: set(json.loads(r["sources"])) for r in beliefs}
        assert by_audience[STAFF] == staff_ids and not by_audience[""] & staff_ids  # split with its sources

        # Later messages of the channel keep to its audience; an import (no audience of its own) too.
        later = await engine.ingest(_with(chat.msg("the team meets thursday, bring the slides", channel="staff"),
                                          STAFF))
        imported = await engine.ingest(chat.msg("thursday team meeting moved to the small room", channel="staff"))
        audience = {w.id: w.audience for w in await engine.worlds(Viewer.operator(SCOPE))}
        assert audience[later.world_id] == audience[imported.world_id] == STAFF

        # Opened up again: everything comes back to the public audience.
        assert await engine.set_audiences(SCOPE, {"staff": ""}) == ["staff"]
        assert {w.audience for w in await engine.worlds(Viewer.operator(SCOPE))} == {""}
        assert sum(w.evidence for w in await engine.worlds(SCOPE)) == 6
        await close_engine(db, engine)
        await llm.close()


async def test_a_restart_keeps_the_partitions(db_url):
    db, engine = await open_engine(db_url)
    chat = Chat(SCOPE)
    hidden = await engine.ingest(_with(chat.msg("the severance terms are confidential", channel="staff"), STAFF))
    await close_engine(db, engine)
    db, engine = await open_engine(db_url)
    assert (await engine.route_query(Viewer(SCOPE), "severance terms"))[0] is None
    assert (await engine.route_query(Viewer(SCOPE, STAFF), "severance terms"))[0].id == hidden.world_id
    again = await engine.ingest(chat.msg("the severance terms are signed", channel="staff"))
    assert again.world_id == hidden.world_id  # recorded audience, rebuilt index
    await close_engine(db, engine)


def _with(message, audience: str):
    message.audience = audience
    return message
