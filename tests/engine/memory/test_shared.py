"""Two memory engines on one database, as two bot processes have: each keeps its scopes' worlds
and centroid index in memory, yet routes with the worlds the other one made (SQLite: data_version
and the scope stamps; PostgreSQL: the stamp trigger's change notices, LISTEN/NOTIFY)."""
from __future__ import annotations

from tests.helpers.memory import Chat, close_engine, open_engine

SETTINGS = dict(base_threshold=0.3, context_weight=0.0)


async def test_a_world_born_in_another_process_is_routed_to(db_url):
    here_db, here = await open_engine(db_url, **SETTINGS)
    there_db, there = await open_engine(db_url, **SETTINGS)
    try:
        chat = Chat()
        await here.ingest(chat.msg("my sourdough bread did not rise in the oven"))
        assert len(here.cache.scopes[chat.scope].worlds) == 1   # loaded and cached here
        born = await there.ingest(chat.msg("how do I read a csv file with pandas", channel="dev"))
        assert born.action == "birth"
        again = await here.ingest(chat.msg("pandas dataframe from a csv file is slow to load", channel="dev"))
        assert again.action == "absorb" and again.world_id == born.world_id   # no twin world here
    finally:
        await close_engine(there_db, there)
        await close_engine(here_db, here)
