"""The simulation commands: /simulate, /sims, /sim, /interview, /report (and replies to a report).

``setup(app)`` builds the process's simulation service once (engine.sim.simulations.Simulations,
kept as ``app.sims``) with its own run service (``make_runs``), the shared LLM client, the
process's embedder (``app.embedder``, the one memory uses) and memory engine (set up before this
feature; each simulation's posts become memory there), then sets up the thin handler
modules, each a ``setup(app)``: they parse, check permission, call the service and format.
``/sim`` is registered from the actions the modules in ``ADD_SIM_ACTIONS`` added
(bot.features.simulation.actions): a module that adds one goes in that list.

Administrators start simulations; stopping, resuming, interviewing and injecting events into one belong to the person
who started it and to administrators. A restart interrupts the pipeline job; /resume continues
at the first unfinished step, the run after its last completed round.
"""
from __future__ import annotations

from bot.features.simulation import compare, control, fork, inject, interview, report, reportchat, start, status
from bot.features.simulation.actions import sim_actions
from engine.sim.run.step import make_runs
from engine.sim.simulations import Simulations

# The order of /help: /simulate and /sims, then /sim, registered once the modules that add its
# actions have added them, then the other commands.
ADD_SIM_ACTIONS = [status, control, inject, fork]
COMMANDS = [interview, report, reportchat, compare]


def setup(app) -> None:
    llm = app.services.get("llm")
    runs = make_runs(app.db, app.config, app.owner, llm.usage if llm is not None else None, llm=llm)
    app.sims = sims = Simulations(app.db, app.config, app.jobs, runs, llm, app.embedder,
                                  memory=app.services.get("memory"))
    app.on_start.append(sims.start)
    app.on_stop.append(sims.close)
    sims.register_jobs(on_report=report.poster(app))
    start.setup(app)
    for module in ADD_SIM_ACTIONS:
        module.setup(app)
    sim_actions(app).register(app)
    for module in COMMANDS:
        module.setup(app)
