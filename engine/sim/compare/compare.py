"""Compare two futures: two runs (typically a parent and its fork) side by side.

``compare_simulations`` reads both runs and what differs between them
(``engine/sim/compare/runs``), draws the overlay charts of activity and belief split per round
(``engine/sim/compare/charts``), has the LLM write a short narrative in which every
claim cites posts of the run it comes from, ``[A twitter post 12]`` / ``[B reddit post 3]``,
a citation of a post its run does not have being flagged (``engine/sim/compare/narrative``),
and writes it all up (``engine/sim/compare/writeup``). Without an LLM, or once a budget is
reached, the comparison is written without the narrative and says why.

Either side may be an ensemble (engine.sim.ensemble): its median-most run is then the run
compared, and ``engine/sim/compare/ensembles`` adds what each side says as a whole, with the
chart of both sides' bands (``sides``).

Output in ``out_dir``: compare.md, compare.json and charts/activity.png, charts/beliefs.png
(and charts/ensembles.png).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from engine import language
from engine.offload import run_cpu
from engine.sim.compare import ensembles
from engine.sim.compare.charts import draw_comparison_charts
from engine.sim.compare.narrative import write_narrative
from engine.sim.compare.runs import compare_runs, load_run
from engine.sim.compare.writeup import facts, render, summary
from engine.sim.stance.history import load_beliefs

Progress = Callable[[float, str], Awaitable[None]]


@dataclass
class CompareResult:
    path: Path
    summary: str
    charts: dict[str, Path]
    citations: list[str]
    unverified: list[str]
    from_round: int


async def compare_simulations(db, llm, a: tuple[str, Path], b: tuple[str, Path], out_dir: Path | str, *,
                              job: str | None = None, scope: str | None = None,
                              progress: Progress | None = None,
                              sides: tuple[ensembles.Side, ensembles.Side] | None = None,
                              lang: str = language.DEFAULT) -> CompareResult:
    """Compare run A = (sim id, folder) with run B and write the comparison into ``out_dir``;
    ``sides``: what each side says as a whole, when one of them is an ensemble.

    ``llm`` may be None: the comparison is then written without the narrative, which is
    otherwise written in ``lang`` (A's language)."""
    async def step(fraction: float, message: str) -> None:
        if progress is not None:
            await progress(fraction, message)

    out = Path(out_dir)
    await step(0.05, "reading both runs")
    runs = [await run_cpu(load_run, letter, sim_id, folder, await load_beliefs(db, sim_id))
            for letter, (sim_id, folder) in (("A", a), ("B", b))]
    cmp = await run_cpu(compare_runs, *runs)
    await step(0.4, "drawing the charts")
    injected = {r.letter: [e.round for e in r.injected] for r in cmp.runs}
    charts = await run_cpu(draw_comparison_charts, out / "charts",
                           {r.letter: (r.sim_id, r.stats.rounds) for r in cmp.runs},
                           {r.letter: (r.sim_id, r.beliefs) for r in cmp.runs}, cmp.from_round, injected)
    if sides is not None:
        charts = {ensembles.CHART: await run_cpu(ensembles.draw, out / "charts", *sides), **charts}
    await step(0.6, "writing the narrative" if llm is not None else "writing the comparison")
    data = facts(cmp)
    if sides is not None:
        data["sides_as_wholes"] = ensembles.facts(*sides)
    narrative = await write_narrative(llm, cmp, data, job=job, scope=scope, lang=lang)
    await step(0.95, "writing compare.md")
    path = out / "compare.md"
    path.write_text(render(cmp, charts, narrative, out, ensembles.markdown(*sides) if sides else ()),
                    encoding="utf-8")
    text = summary(cmp, narrative)
    if sides is not None:
        text = "\n".join(ensembles.summary_lines(*sides)) + "\n" + text
    (out / "compare.json").write_text(json.dumps({
        "a": a[0], "b": b[0], "from_round": cmp.from_round, "shared_rounds": cmp.shared, "summary": text,
        "charts": {k: str(v) for k, v in charts.items()}, "citations": narrative.cited,
        "unverified_citations": narrative.unverified, "facts": data}, indent=2), encoding="utf-8")
    return CompareResult(path, text, charts, narrative.cited, narrative.unverified, cmp.from_round)
