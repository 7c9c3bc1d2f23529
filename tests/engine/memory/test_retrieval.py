"""Finding one world by what a member types after /world: its id, an id prefix of three characters
or more, its topic, or words inside its topic (LIKE's wildcards typed as plain characters), the
most accessed first, and never a world of an audience the viewer cannot read."""
from __future__ import annotations

from engine.memory.audience import Viewer
from engine.memory.models import MemoryMessage
from tests.helpers.memory import T0, close_engine, open_engine

SCOPE = "discord:1"
STAFF = "900"


async def test_a_world_is_found_by_id_prefix_topic_or_topic_words_within_the_viewers_audience(db_url):
    db, engine = await open_engine(db_url, base_threshold=0.3)
    said = [("general", "", "the harbour ferry timetable changes on monday"),
            ("dev", "", "the csv export of the sales report is broken"),
            ("staff", STAFF, "salary review for the harbour staff is next week")]
    worlds = {}
    for n, (channel, audience, text) in enumerate(said):
        message = MemoryMessage(SCOPE, channel, f"m{n}", "ann", text, T0, audience=audience)
        worlds[channel] = (await engine.ingest(message)).world_id
    names = {"general": "Harbour ferry 100%_on time", "dev": "CSV export", "staff": "Harbour salaries"}
    for channel, topic in names.items():
        await db.execute("UPDATE worlds SET topic=? WHERE id=?", (topic, worlds[channel]))
    everyone, staff = Viewer(SCOPE), Viewer(SCOPE, STAFF)

    async def found(viewer: Viewer, typed: str) -> str | None:
        world = await engine.world(viewer, typed)
        return None if world is None else world[0].id

    ferry, csv, salaries = worlds["general"], worlds["dev"], worlds["staff"]
    assert await found(everyone, ferry.upper()) == ferry            # the id, in any case
    assert await found(everyone, csv[:3]) == csv                      # a prefix of three characters
    assert await found(everyone, "zz") is None                        # two characters: no prefix match
    assert await found(everyone, "csv export") == csv                 # the topic
    assert await found(everyone, "salaries") is None                  # another audience's topic: not there
    assert await found(staff, "salaries") == salaries
    await db.execute("UPDATE worlds SET access_count=access_count+5 WHERE id=?", (salaries,))
    assert await found(staff, "harbour") == salaries                  # words in two topics: the most accessed
    assert await found(everyone, "harbour") == ferry                  # ... that the viewer may see
    assert await found(everyone, "100%_on") == ferry                 # % and _ are plain characters here
    assert await found(everyone, "100%xon") is None and await found(everyone, "1_0") is None
    assert await found(everyone, "   ") is None
    await close_engine(db, engine)
