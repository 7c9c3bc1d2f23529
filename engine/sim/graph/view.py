"""The knowledge graph to look at: a PNG for the chat and a self-contained interactive HTML file.

Both are drawn from one layout of the loaded graph (``LoadedGraph``: entities, facts and their
networkx graph), so the picture and the page agree. Entities are coloured by type, with a legend
that gives each type's count; node size grows with how connected an entity is, and the most
connected are labelled. A graph larger than ``MAX_NODES`` shows its most connected entities and
says so. Blocking work (a layout, matplotlib, Bokeh): call ``draw`` through ``run_cpu``
(``GraphStore.draw``).

- The PNG (``graph.png``) is about 1200 px wide, sized for a chat's preview: labels large enough
  to read when the image is shrunk, drawn with a white halo over the edges. Text that came from
  documents (names, types) is drawn as is: no mathtext (``parse_math=False``, ``$`` escaped in
  legend labels), as a name like "$5 fare" must read as written.
- The HTML (``graph.html``) is a Bokeh document with BokehJS inlined (``resources=INLINE``): it
  opens offline, from a file, with no server and no request to anywhere (tests/engine/sim/graph/
  test_view.py opens it in a headless Chromium that records every request). Hovering an entity
  shows its type, connections and summary; hovering a line shows its fact; the legend hides or
  shows a type; the toolbar pans, zooms and saves. Field values are escaped by BokehJS in hovers.
"""
from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import networkx as nx  # noqa: E402
from bokeh.embed import file_html  # noqa: E402

# LabelSet is in bokeh.models at run time; bokeh 3.8's type stubs leave it out
from bokeh.models import ColumnDataSource, DataRenderer, HoverTool, LabelSet, Title  # type: ignore[attr-defined]  # noqa: E402,E501
from bokeh.plotting import figure  # noqa: E402
from bokeh.resources import INLINE  # noqa: E402
from matplotlib import patheffects  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from engine.i18n import N_, _  # noqa: E402
from engine.sim.graph.model import EntityRecord  # noqa: E402
from engine.sim.graph.search import LoadedGraph, by_degree  # noqa: E402
from engine.words import plural  # noqa: E402

PNG, HTML = "graph.png", "graph.html"
MAX_NODES = 250        # a larger graph shows its most connected entities
LABELLED = 18          # entities labelled in the PNG (the most connected)
HTML_LABELLED = 40     # and in the HTML page, which can be zoomed
MAX_TYPES = 11         # types with a colour of their own; the rest share one, "other types"
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#17becf", "#8c564b")
OTHER_COLOUR = "#bab0ac"
OTHER = N_("other types")   # a msgid: translated where shown
EDGE_COLOUR = "#9aa5b1"
_CENTRE = -1           # the hidden node the layout ties every entity to (entity ids are positive)


@dataclass(frozen=True)
class GraphPicture:
    png: Path
    html: Path
    entities: int          # in the graph
    facts: int
    shown: int             # entities drawn (at most MAX_NODES)
    types: dict[str, int]  # entity type -> how many, most common first


@dataclass
class _Layout:
    entities: list[EntityRecord]           # shown, most connected first
    pos: dict[int, tuple[float, float]]
    pairs: list[tuple[int, int, int]]      # (entity, entity, facts between them)
    colours: dict[str, str]                # type as shown -> colour
    shown_type: dict[int, str]             # entity id -> its type as shown (OTHER beyond MAX_TYPES)
    counts: dict[str, int]                 # type -> entities of the whole graph


def _layout(g: LoadedGraph) -> _Layout:
    ranked = by_degree(g)
    entities = ranked[:MAX_NODES]
    keep = {e.id for e in entities}
    simple: nx.Graph = nx.Graph()
    simple.add_nodes_from(keep)
    for a, b in g.graph.edges():
        if a in keep and b in keep and a != b:
            weight = simple.get_edge_data(a, b, {}).get("weight", 0)
            simple.add_edge(a, b, weight=weight + 1)
    pos = _positions(simple)
    counts: dict[str, int] = {}
    for e in g.entities:
        counts[e.type] = counts.get(e.type, 0) + 1
    counts = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    coloured = list(counts)[:MAX_TYPES]
    colours = {t: PALETTE[i] for i, t in enumerate(coloured)}
    shown_type = {e.id: e.type if e.type in colours else OTHER for e in entities}
    if OTHER in shown_type.values():
        colours[OTHER] = OTHER_COLOUR
    pairs = [(a, b, d["weight"]) for a, b, d in simple.edges(data=True)]
    return _Layout(entities, {n: (float(x), float(y)) for n, (x, y) in pos.items()}, pairs, colours, shown_type,
                   counts)


def _positions(simple: nx.Graph) -> dict[int, tuple[float, float]]:
    """Entities with facts by a spring layout, a faint tie to a hidden centre holding the separate
    parts of the graph together; entities without a fact on a ring around them, not flung to the
    corners."""
    linked = [n for n in simple if simple.degree(n)]
    alone = sorted(n for n in simple if not simple.degree(n))
    pos: dict[int, tuple[float, float]] = {}
    if linked:
        held = simple.subgraph(linked).copy()
        held.add_edges_from(((_CENTRE, n) for n in linked), weight=0.3)
        found = nx.spring_layout(held, seed=7, k=2.5 / math.sqrt(len(linked)), iterations=300, weight="weight")
        centre = found.pop(_CENTRE)
        pos = {n: (float(x - centre[0]), float(y - centre[1])) for n, (x, y) in found.items()}
    radius = 1.15 * max((math.hypot(x, y) for x, y in pos.values()), default=0.0) or 1.0
    for i, n in enumerate(alone):
        angle = 2 * math.pi * i / len(alone) + math.pi / 2
        pos[n] = (radius * math.cos(angle), radius * math.sin(angle))
    return pos


def _size(degree: int, top: int) -> float:
    """A node's area in points² (matplotlib); Bokeh takes its square root as a diameter."""
    return 90 + 900 * math.sqrt(degree / top) if top else 120


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"


def _type_label(name: str, lay: _Layout) -> str:
    count = sum(n for t, n in lay.counts.items() if t not in lay.colours) if name == OTHER else lay.counts[name]
    return f"{_clip(_(name) if name == OTHER else name, 30)} ({count})"


def _png(lay: _Layout, g: LoadedGraph, path: Path, title: str) -> None:
    fig = Figure(figsize=(12, 12))
    ax = fig.add_subplot()
    ax.set_axis_off()
    labelled = 0
    if not lay.entities:
        ax.text(0.5, 0.5, _("the knowledge graph holds no entities"), ha="center", va="center", fontsize=16,
                color="grey", transform=ax.transAxes)
    else:
        top = max(e.degree for e in lay.entities) or 1
        heaviest = max((w for _, _, w in lay.pairs), default=1)
        for a, b, w in lay.pairs:
            (x0, y0), (x1, y1) = lay.pos[a], lay.pos[b]
            ax.plot([x0, x1], [y0, y1], color=EDGE_COLOUR, alpha=0.55, linewidth=0.8 + 2.4 * w / heaviest, zorder=1)
        for name, colour in lay.colours.items():
            members = [e for e in lay.entities if lay.shown_type[e.id] == name]
            if not members:
                continue
            ax.scatter([lay.pos[e.id][0] for e in members], [lay.pos[e.id][1] for e in members],
                       s=[_size(e.degree, top) for e in members], c=colour, edgecolors="white", linewidths=1.0,
                       zorder=2, label=_type_label(name, lay).replace("$", r"\$"))
        ax.margins(0.08)
        labelled = _label(fig, ax, lay, top)
        legend = ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(lay.colours)),
                           frameon=False, fontsize=12, title=_("entity type (how many)"), title_fontsize=12,
                           handletextpad=0.3, columnspacing=1.2)
        for handle in legend.legend_handles:   # one marker size for every type, whatever its first node's
            if isinstance(handle, PathCollection):
                handle.set_sizes([140])
    shown = "" if len(lay.entities) == len(g.entities) else _(" (the {n} most connected shown)", n=len(lay.entities))
    named = _(" · named: the {n} most connected with room for a label", n=labelled) if lay.entities else ""
    ax.set_title(f"{title}\n" + _("{entities}, {facts}{shown} · size: connections{named}",
                                  entities=plural(len(g.entities), "{n} entity", "{n} entities"),
                                  facts=plural(len(g.facts), "{n} fact", "{n} facts"), shown=shown, named=named),
                 fontsize=15, parse_math=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")


def _label(fig: Figure, ax, lay: _Layout, top: int) -> int:
    """Name the most connected entities, up to ``LABELLED``: each label above its node, else below,
    right or left of it, wherever it overlaps no label already placed; one with no room stays
    unnamed (the HTML page names it on hover). Returns how many were named."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    halo = [patheffects.withStroke(linewidth=3.5, foreground="white")]
    placed: list = []
    for e in lay.entities[:LABELLED]:
        gap = 0.5 * math.sqrt(_size(e.degree, top)) + 2
        for dx, dy, ha, va in ((0, gap, "center", "bottom"), (0, -gap, "center", "top"),
                               (gap, 0, "left", "center"), (-gap, 0, "right", "center")):
            text = ax.annotate(_clip(e.name, 28), lay.pos[e.id], xytext=(dx, dy), textcoords="offset points",
                               ha=ha, va=va, fontsize=12, zorder=3, path_effects=halo, parse_math=False)
            box = text.get_window_extent(renderer).expanded(1.05, 1.1)
            if not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            text.remove()
    return len(placed)


def _html(lay: _Layout, g: LoadedGraph, path: Path, title: str) -> None:
    p = figure(title=title, width=1150, height=850, tools="pan,wheel_zoom,box_zoom,reset,save",
               active_scroll="wheel_zoom", match_aspect=True, toolbar_location="above")
    p.axis.visible = False
    p.grid.visible = False
    if isinstance(p.title, Title):
        p.title.text_font_size = "15px"
    by_id = {e.id: e for e in lay.entities}
    facts: dict[tuple[int, int], list[str]] = {}
    for a, b, key in g.graph.edges(keys=True):
        if a in by_id and b in by_id:
            facts.setdefault((min(a, b), max(a, b)), []).append(g.graph.edges[a, b, key]["fact"].fact)
    edges = ColumnDataSource({
        "xs": [[lay.pos[a][0], lay.pos[b][0]] for a, b, _ in lay.pairs],
        "ys": [[lay.pos[a][1], lay.pos[b][1]] for a, b, _ in lay.pairs],
        "pair": [f"{by_id[a].name} — {by_id[b].name}" for a, b, _ in lay.pairs],
        "fact": [_clip(" | ".join(facts.get((min(a, b), max(a, b)), [])), 400) for a, b, _ in lay.pairs]})
    lines = p.multi_line("xs", "ys", source=edges, line_color=EDGE_COLOUR, line_alpha=0.5, line_width=1.5,
                         hover_line_color="#333333", hover_line_alpha=1.0, name="facts")
    top = max((e.degree for e in lay.entities), default=1) or 1
    nodes: list[DataRenderer] = []
    for name, colour in lay.colours.items():
        members = [e for e in lay.entities if lay.shown_type[e.id] == name]
        if not members:
            continue
        source = ColumnDataSource({
            "x": [lay.pos[e.id][0] for e in members], "y": [lay.pos[e.id][1] for e in members],
            "size": [math.sqrt(_size(e.degree, top)) for e in members], "name": [e.name for e in members],
            "type": [e.type for e in members], "degree": [e.degree for e in members],
            "summary": [_clip(e.summary, 300) for e in members]})
        nodes.append(p.scatter("x", "y", size="size", source=source, fill_color=colour, line_color="white",
                               hover_line_color="#333333", legend_label=_type_label(name, lay), name="entities"))
    p.add_tools(HoverTool(renderers=nodes, tooltips=[("entity", "@name"), ("type", "@type"),
                                                     ("connections", "@degree"), ("summary", "@summary")]),
                HoverTool(renderers=[lines], tooltips=[("between", "@pair"), ("facts", "@fact")],
                          line_policy="interp"))
    labelled = lay.entities[:HTML_LABELLED]
    p.add_layout(LabelSet(x="x", y="y", text="name", y_offset=9, text_align="center", text_font_size="12px",
                          background_fill_color="white", background_fill_alpha=0.6,
                          source=ColumnDataSource({"x": [lay.pos[e.id][0] for e in labelled],
                                                   "y": [lay.pos[e.id][1] for e in labelled],
                                                   "name": [_clip(e.name, 28) for e in labelled]})))
    if nodes:
        p.legend.click_policy = "hide"
        p.legend.title = _("entity type (how many): click to hide")
        p.add_layout(p.legend[0], "right")
    path.write_text(file_html(p, resources=INLINE, title=title), encoding="utf-8")


def draw(g: LoadedGraph, out_dir: Path, title: str) -> GraphPicture:
    """Write ``graph.png`` and ``graph.html`` of the loaded graph into ``out_dir`` (blocking)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lay = _layout(g)
    png, html = out_dir / PNG, out_dir / HTML
    # each file whole or not at all: two /graph at once must not post one half-written
    partial_png, partial_html = out_dir / f".{PNG}.{os.getpid()}.{threading.get_ident()}.png", \
        out_dir / f".{HTML}.{os.getpid()}.{threading.get_ident()}.html"
    _png(lay, g, partial_png, title)
    _html(lay, g, partial_html, title)
    os.replace(partial_png, png)
    os.replace(partial_html, html)
    return GraphPicture(png, html, len(g.entities), len(g.facts), len(lay.entities), lay.counts)
