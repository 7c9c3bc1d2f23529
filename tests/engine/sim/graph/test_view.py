"""The knowledge graph to look at (engine.sim.graph.view): the PNG is chat-sized, coloured by type
with a legend, and draws names as written; the HTML page is opened in a real headless Chromium
(Playwright driving Debian's /usr/bin/chromium, a fresh profile, no network features) from a file:
it renders every entity, logs no error, sends no request anywhere (not even for the math fonts a
"$$...$$" type name could call for) and runs nothing a hostile entity name carries."""
from __future__ import annotations

import random
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.sim.graph.search import build
from engine.sim.graph.vectors import to_blob
from engine.sim.graph.view import MAX_NODES, PALETTE, draw

pytestmark = pytest.mark.timeout(180)
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE = "</script><script>window.pwned = 1</script>"
TYPES = ["Person"] * 14 + ["Organization"] * 8 + ["Company"] * 5 + ["Politician"] * 5 + ["MediaOutlet"] * 4 \
    + ["LaborUnion"] * 3 + ["$$x^2$$ group"]
NAMES = ["Maria Lopez", "Dockworkers Union", "Harbor Logistics", "Valmora Council", "Port Authority",
         "The Valmora Herald", "Jonas Berg", "$5 fare riders", HOSTILE, "Mayor Elena Ruiz"]


def graph(entities: int = len(TYPES), facts: int = 75, seed: int = 3):
    rng = random.Random(seed)
    names = (NAMES + [f"Resident {i}" for i in range(entities)])[:entities]
    vec = to_blob(np.ones(4, dtype=np.float32))
    rows = [{"id": i + 1, "name": n, "type": TYPES[i % len(TYPES)], "summary": f"{n} takes part <b>in</b> it.",
             "attributes": "{}", "aliases": "[]", "mentions": 1, "embedding": vec} for i, n in enumerate(names)]
    edges = []
    for k in range(facts):
        a = rng.randint(1, 5) if rng.random() < 0.6 else rng.randint(1, entities)
        b = rng.randint(1, entities)
        if a != b:
            edges.append({"id": k + 1, "source_id": a, "target_id": b, "relation": "OPPOSES", "valid_at": None,
                          "invalid_at": None, "fact": f"{names[a - 1]} opposes {names[b - 1]}.", "embedding": vec})
    return build(rows, edges)


def test_the_picture_is_chat_sized_coloured_by_type_and_the_page_loads_nothing_from_outside(tmp_path):
    g = graph()
    picture = draw(g, tmp_path, "Knowledge graph of simulation 1a2b3c4d")
    assert (picture.entities, picture.shown) == (len(TYPES), len(TYPES)) and picture.facts == len(g.facts)
    assert list(picture.types)[:2] == ["Person", "Organization"] and picture.types["$$x^2$$ group"] == 1
    image = Image.open(picture.png).convert("RGB")
    assert 1000 <= image.width <= 1400 and 1000 <= image.height <= 1400, image.size
    colours = set(image.getdata())
    shown = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in PALETTE[:len(picture.types)]}
    assert shown <= colours                          # every type's colour is drawn
    html = picture.html.read_text()
    # no tag of the page fetches anything: every script and style is inline
    assert not re.search(r"<(?:script|link|img|iframe|embed|object|source)\b[^>]*\b(?:src|href|data)\s*=", html)
    assert not re.search(r"@import|url\(\s*['\"]?https?:", html)
    assert HOSTILE not in html                       # a name cannot close the page's script


def test_a_large_graph_shows_its_most_connected_entities(tmp_path):
    picture = draw(graph(entities=MAX_NODES + 40, facts=600), tmp_path, "Knowledge graph of simulation big")
    assert (picture.entities, picture.shown) == (MAX_NODES + 40, MAX_NODES)


def test_the_page_renders_its_entities_in_a_headless_browser_offline(tmp_path):
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: apt-get install -y chromium (the README's Quick start)")
    from playwright.sync_api import sync_playwright

    g = graph()
    picture = draw(g, tmp_path / "graph", "Knowledge graph of simulation 1a2b3c4d")
    errors, requests = [], []
    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=str(CHROMIUM), headless=True,
                                                        args=FLAGS, viewport={"width": 1300, "height": 950})
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(picture.html.as_uri())
            page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.index "
                                   "&& Object.keys(Bokeh.index).length > 0", timeout=30_000)
            drawn = page.evaluate("""() => {
                let n = 0;
                for (const m of Bokeh.documents[0].all_models)
                    if (m.name === 'entities') n += m.data_source.data.name.length;
                return n; }""")
            page.wait_for_function("() => document.querySelector('.bk-Figure') !== null", timeout=30_000)
            shot = tmp_path / "page.png"
            page.mouse.move(650, 450)
            page.screenshot(path=str(shot))
            pwned = page.evaluate("() => window.pwned")
        finally:
            browser.close()
    assert drawn == len(g.entities)
    assert not errors, errors
    assert requests == [picture.html.as_uri()], requests       # nothing but the file itself
    assert pwned is None
    image = Image.open(shot).convert("RGB")
    painted = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in PALETTE[:6]} & set(image.getdata())
    assert len(painted) >= 5, painted                          # the canvas shows the types' colours
