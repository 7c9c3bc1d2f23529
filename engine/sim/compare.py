"""Compare two futures: two runs (typically a parent and its fork) side by side.

``compare_simulations`` reads both runs and what differs between them
(``engine/sim/compare_runs``), draws the overlay charts of activity and belief split per round
(``engine/sim/report/compare_charts``), has the LLM write a short narrative in which every
claim cites posts of the run it comes from, ``[A twitter post 12]`` / ``[B reddit post 3]``,
a citation of a post its run does not have being flagged (``engine/sim/compare_narrative``),
and writes it all up (``engine/sim/compare_report``). Without an LLM, or once a budget is
reached, the comparison is written without the narrative and says why.

Output in ``out_dir``: compare.md, compare.json and charts/activity.png, charts/beliefs.png.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from engine.offload import run_cpu
from engine.sim.beliefs import load_beliefs
from engine.sim.compare_narrative import write_narrative
from engine.sim.compare_report import facts, render, summary
from engine.sim.compare_runs import compare_runs, load_run
from engine.sim.report.compare_charts import draw_comparison_charts

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
                              progress: Progress | None = None) -> CompareResult:
    """Compare run A = (sim id, folder) with run B and write the comparison into ``out_dir``.

    ``llm`` may be None: the comparison is then written without the narrative."""
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
    await step(0.6, "writing the narrative" if llm is not None else "writing the comparison")
    data = facts(cmp)
    narrative = await write_narrative(llm, cmp, data, job=job, scope=scope)
    await step(0.95, "writing compare.md")
    path = out / "compare.md"
    path.write_text(render(cmp, charts, narrative, out), encoding="utf-8")
    text = summary(cmp, narrative)
    (out / "compare.json").write_text(json.dumps({
        "a": a[0], "b": b[0], "from_round": cmp.from_round, "shared_rounds": cmp.shared, "summary": text,
        "charts": {k: str(v) for k, v in charts.items()}, "citations": narrative.cited,
        "unverified_citations": narrative.unverified, "facts": data}, indent=2), encoding="utf-8")
    return CompareResult(path, text, charts, narrative.cited, narrative.unverified, cmp.from_round)
