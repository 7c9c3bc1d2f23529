"""Simulations have an audience, in storage, on SQLite and PostgreSQL: a simulation belongs to the
audience of the channel it started in (engine.sim.records, through the Simulations service), and
is found, listed, checked for its starter, asked about by a reply to its report and forked only by
a viewer who may read that audience: memory's rule (engine.memory.audience.Viewer). The operator
(no viewer) sees every one. A fork keeps its parent's audience, or takes the asking channel's when
the parent is public. The migration gives simulations started before it the audience their
channel was last recorded with, else the public one.

The chat side (every command, through discord.py against the fake) is tests/test_sim_privacy.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.app import App
from engine.config import parse_config
from engine.db import discover_migrations, open_database
from engine.memory.audience import PUBLIC, Viewer
from engine.sim.fork import ForkRefused
from engine.sim.records import not_here
from engine.sim.run.output import ACTIONS_LOG, CHECKPOINT, CHECKPOINT_DB, MEMORY_FILE
from tests.engine.sim.test_fork import add_parent

SCOPE = "discord:1"
STAFF = "900"       # a staff-only channel: its audience is its own id
BOARD = "901"       # another restricted channel, read by other people
GENERAL = Viewer(SCOPE, PUBLIC)
IN_STAFF = Viewer(SCOPE, STAFF)
IN_BOARD = Viewer(SCOPE, BOARD)


@pytest.fixture
async def app(tmp_path, db_url):
    app = await App.create(parse_config({"bot": {"data_dir": str(tmp_path / "data")}, "database": {"url": db_url}},
                                        str(tmp_path / "config.toml")),
                           ["bot.features.core", "bot.features.simulation"])
    await app.start()
    yield app
    await app.close()


async def start(app: App, tmp_path: Path, channel: str, audience: str, scope: str = SCOPE) -> str:
    doc = tmp_path / "plan.txt"
    doc.write_text("The warehouse closes in May.", encoding="utf-8")
    sim_id, _ = await app.sims.create([doc], "how will staff react?", scope, channel, audience=audience)
    return sim_id


async def test_a_simulation_is_found_and_listed_only_where_its_audience_reads(app, tmp_path):
    sims = app.sims
    public = await start(app, tmp_path, "general", PUBLIC)
    staff = await start(app, tmp_path, STAFF, STAFF)
    board = await start(app, tmp_path, BOARD, BOARD)
    elsewhere = await start(app, tmp_path, "general", PUBLIC, scope="discord:2")

    assert (await sims.get(staff)).audience == STAFF   # the operator sees it, with its audience
    assert [r.id for r in await sims.listing(GENERAL)] == [public]
    assert {r.id for r in await sims.listing(IN_STAFF)} == {public, staff}
    assert {r.id for r in await sims.listing(IN_BOARD)} == {public, board}
    assert {r.id for r in await sims.listing(Viewer.operator(SCOPE))} == {public, staff, board}
    for sim_id, viewer, seen in [(staff, GENERAL, False), (staff, IN_STAFF, True), (staff, IN_BOARD, False),
                                 (public, IN_STAFF, True), (elsewhere, GENERAL, False),
                                 (board, Viewer.operator(SCOPE), True), (elsewhere, Viewer.operator(SCOPE), False)]:
        assert (await sims.get(sim_id, viewer) is not None) is seen, (sim_id, viewer)
        # the permission rules' lookup: '' (no job recorded) for one it sees, None as for no simulation
        assert (await sims.starter(sim_id, viewer)) == ("" if seen else None), (sim_id, viewer)
    assert await sims.get("nosuch", GENERAL) is None and await sims.starter("nosuch", GENERAL) is None


async def test_a_reply_to_a_report_asks_only_where_the_simulation_is_seen(app, tmp_path):
    sims = app.sims
    staff = await start(app, tmp_path, STAFF, STAFF)
    public = await start(app, tmp_path, "general", PUBLIC)
    await sims.note_report_messages(staff, SCOPE, STAFF, ["m1", "m2"])
    await sims.note_report_messages(public, SCOPE, "general", ["m3"])
    assert await sims.report_of_message(IN_STAFF, "m1") == staff
    assert await sims.report_of_message(GENERAL, "m1") is None     # a plain message, as a reply to anything else
    assert await sims.report_of_message(IN_BOARD, "m2") is None
    assert await sims.report_of_message(Viewer("discord:2", PUBLIC), "m1") is None
    assert await sims.report_of_message(GENERAL, "m3") == public
    assert await sims.report_of_message(IN_STAFF, "m3") == public


async def stopped_after_round_2(app: App, folder: Path, channel: str, audience: str) -> None:
    """Simulation c1 of SCOPE in ``channel``: steps 1-3 done and a run stopped after round 2."""
    await add_parent(app.db, folder)
    await app.db.execute("UPDATE simulations SET scope=?, channel=?, audience=? WHERE id='c1'",
                         (SCOPE, channel, audience))
    for platform in ("twitter", "reddit"):
        pdir = folder / platform
        pdir.mkdir()
        (pdir / CHECKPOINT).write_text(json.dumps({"rounds_done": 2, "trace_rowid": 5}))
        (pdir / CHECKPOINT_DB).write_bytes(b"state after round 2")
        (pdir / MEMORY_FILE).write_text("{}")
        (pdir / ACTIONS_LOG).write_text('{"type": "round_end", "round": 0}\n{"type": "round_end", "round": 1}\n')
    await app.db.execute("INSERT INTO sim_runs(sim_id, folder, status, rounds_total, rounds_done, actions, started_at,"
                         " updated_at) VALUES ('c1', ?, 'stopped', 4, ?, ?, 'x', 'x')",
                         (str(folder), json.dumps(dict.fromkeys(("twitter", "reddit"), 2)),
                          json.dumps(dict.fromkeys(("twitter", "reddit"), 7))))


@pytest.mark.parametrize("parent, asker, fork", [
    (STAFF, IN_STAFF, STAFF),          # a fork keeps its parent's audience
    (STAFF, None, STAFF),              # the operator's too
    (PUBLIC, GENERAL, PUBLIC),
    (PUBLIC, IN_STAFF, STAFF),         # asked in a staff channel (its event typed there): that channel's
    (PUBLIC, None, PUBLIC),
])
async def test_a_fork_belongs_to_its_parents_audience(app, tmp_path, parent, asker, fork):
    await stopped_after_round_2(app, tmp_path / "sim", STAFF if parent else "general", parent)
    made = await app.sims.fork("c1", 2, inject="The board resigns", viewer=asker, channel="here")
    assert (await app.sims.get(made.sim_id)).audience == fork
    assert (await app.sims.get(made.sim_id, asker or Viewer.operator(SCOPE))) is not None


async def test_a_fork_of_a_simulation_the_asker_cannot_see_is_refused_as_unknown(app, tmp_path):
    await stopped_after_round_2(app, tmp_path / "sim", STAFF, STAFF)
    count = await app.db.fetchval("SELECT count(*) FROM simulations")
    for viewer in (GENERAL, IN_BOARD, Viewer("discord:2", PUBLIC)):
        with pytest.raises(ForkRefused) as refused:
            await app.sims.fork("c1", 2, viewer=viewer)
        assert str(refused.value) == not_here("c1")
    with pytest.raises(ForkRefused) as refused:
        await app.sims.fork("nosuch", 2, viewer=GENERAL)
    assert str(refused.value) == not_here("nosuch")
    assert await app.db.fetchval("SELECT count(*) FROM simulations") == count


async def test_simulations_from_before_get_the_audience_of_their_channel(db_url):
    mine = next(m for m in discover_migrations() if m.path.name.endswith("_sim_audiences.sql"))
    db = await open_database(db_url, upgrade=False)
    try:
        await db.upgrade(target=mine.version - 1)
        await db.executemany("INSERT INTO channel_audiences(scope, channel, audience, changed_at) VALUES (?,?,?,'x')",
                             [(SCOPE, STAFF, STAFF), (SCOPE, "general", PUBLIC), ("discord:2", "900", "900")])
        await db.executemany(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES (?, ?, ?, 'r', '{}', 'f', 'x')",
            [("staff", SCOPE, STAFF), ("general", SCOPE, "general"), ("unknown", SCOPE, "555"),
             ("nochannel", SCOPE, None), ("other", "discord:3", "900")])
        await db.upgrade()
        got = {r["id"]: r["audience"] for r in await db.fetchall("SELECT id, audience FROM simulations")}
        assert got == {"staff": STAFF, "general": PUBLIC, "unknown": PUBLIC, "nochannel": PUBLIC, "other": PUBLIC}
    finally:
        await db.close()
