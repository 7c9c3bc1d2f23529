"""/graph and /sim agents on the sample simulation: /graph posts a summary, the PNG as an image and
the interactive page as a file, only where the simulation may be seen (elsewhere: the answer about
an id that does not exist, and nothing uploaded); /sim agents lists each agent with its persona,
platforms and latest stance per platform, or the stance it starts from; before steps 2 and 3 have
run there is nothing to show, in one line."""
from __future__ import annotations

import pytest
from PIL import Image

from bot.neutral import Incoming
from tests.engine.sim.report.test_chat import add_stances, prepare, stances
from tests.helpers.chat import RecordingReply, make_app
from tests.helpers.simdata import sample_simulation

pytestmark = pytest.mark.timeout(180)
SCOPE, STAFF = "console:test", "staff-audience"


async def ask(app, text: str, audience: str = "") -> RecordingReply:
    reply = RecordingReply()
    await app.dispatch(Incoming("console", SCOPE, "general", "u1", "u1", text, audience=audience), reply)
    return reply


@pytest.fixture
async def app(tmp_path, tmp_path_factory):
    app = await make_app(tmp_path)
    await prepare(app, sample_simulation(tmp_path_factory, tmp_path), SCOPE, "general")
    await app.db.execute("UPDATE simulations SET audience=? WHERE id='sim1'", (STAFF,))
    await app.start()
    yield app
    await app.close()


async def test_graph_posts_a_picture_and_a_page_where_the_simulation_may_be_seen(app):
    reply = await ask(app, "/graph sim1", audience=STAFF)
    [(_, summary)] = reply.of("send")
    assert summary.startswith("🕸 Knowledge graph of simulation `sim1`: 4 entities, 5 facts; by type: Organization 2")
    [(_, png, caption)] = reply.of("image")
    [(_, page, _)] = reply.of("file")
    assert png.name == "graph.png" and page.name == "graph.html" and caption == "Knowledge graph of sim1"
    sim = await app.sims.get("sim1")
    assert png.parent == page.parent == sim.folder / "graph"
    assert Image.open(png).width >= 900
    assert "City Council" in page.read_text() and "Bokeh" in page.read_text()

    hidden = await ask(app, "/graph sim1")                       # #general does not read the staff's
    assert [e[1] for e in hidden.log] == ["⚠ no simulation sim1 here. /sims lists them."]
    assert (await ask(app, "/graph nosuch")).log == [("send", "⚠ no simulation nosuch here. /sims lists them.")]
    await app.db.execute("DELETE FROM sim_entities WHERE sim_id='sim1'")
    app.sims.graph._cache.clear()
    assert "has no knowledge graph yet: step 2 (graph) builds it" in (await ask(app, "/graph sim1", STAFF)).log[0][1]


async def test_sim_agents_lists_persona_platforms_and_latest_stance(app):
    before = (await ask(app, "/sim agents sim1", audience=STAFF)).of("send")[0][1]
    assert "6 agents of simulation `sim1`, with the stance each starts from (no round classified yet)" in before
    assert "0. Alice (@alice, Official, on twitter, reddit) — Official in the city · starts supportive" in before
    await add_stances(app, stances([("twitter", 1, 0, 0.6), ("twitter", 2, 0, -0.5), ("reddit", 1, 0, 0.1),
                                    ("twitter", 2, 1, -0.8)]))
    after = (await ask(app, "/sim agents sim1", audience=STAFF)).of("send")[0][1]
    assert "each one's latest stance per platform (score: -1 against … +1 for)" in after
    assert "0. Alice (@alice, Official, on twitter, reddit) — Official in the city · reddit neutral (+0.1, round 1); " \
           "twitter against (-0.5, round 2)" in after
    assert "1. Bob (@bob, Commuter, on twitter, reddit) — Commuter in the city · twitter against (-0.8, round 2)" \
        in after
    assert "2. Carol (@carol, Journalist, on twitter, reddit) — Journalist in the city · starts neutral" in after
    assert (await ask(app, "/sim agents sim1")).log == [("send", "⚠ no simulation sim1 here. /sims lists them.")]
    sim = await app.sims.get("sim1")
    (sim.folder / "simulation_config.json").unlink()
    assert "has no agents yet: step 3 (environment) makes them" in \
        (await ask(app, "/sim agents sim1", audience=STAFF)).log[0][1]
