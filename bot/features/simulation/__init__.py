"""The simulation commands: /simulate, /sims, /sim, /interview, /report.

``setup(app)`` builds the process's simulation service once (engine.sim.simulations.Simulations,
kept as ``app.sims``) with its own run service (``make_runs``), the shared LLM client and the
process's embedder (``app.embedder``, the one memory uses), then sets up the thin handler
modules, each a ``setup(app)``: they parse, check permission, call the service and format.
``/sim`` is registered last, from the actions the modules added (bot.features.simulation.actions).

Administrators start simulations; stopping, resuming and interviewing one belong to the person
who started it and to administrators. A restart interrupts the pipeline job; /resume continues
at the first unfinished step, the run after its last completed round.
"""
from __future__ import annotations

from bot.features.simulation import compare, control, interview, report, start, status
from bot.features.simulation.actions import sim_actions
from engine.sim.run.step import make_runs
from engine.sim.simulations import Simulations

HANDLERS = [start, status, control, interview, report, compare]


def setup(app) -> None:
    llm = app.services.get("llm")
    runs = make_runs(app.db, app.config, app.owner, llm.usage if llm is not None else None)
    app.sims = sims = Simulations(app.db, app.config, app.jobs, runs, llm, app.embedder)
    app.on_start.append(sims.start)
    app.on_stop.append(sims.close)
    sims.register_jobs(on_report=report.poster(app))
    for module in HANDLERS:
        module.setup(app)
    sim_actions(app).register(app)
