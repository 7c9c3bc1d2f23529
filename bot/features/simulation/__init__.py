"""The simulation commands: /simulate, /sims, /sim, /interview, /report (and replies to a report),
/compare, /graph.

The process's simulation service (engine.sim.simulations.Simulations, ``app.sims``) is built with
the app's other services (engine.services: with its own run service, the shared LLM client, the
process's embedder and memory engine, where each simulation's posts become memory). ``setup(app)``
sets up the thin handler modules, each a ``setup(app)``: they parse, check permission, call the
service and format. ``/sim`` is registered from the actions the modules in ``ADD_SIM_ACTIONS`` added
(their ``setup(app, actions)``, bot.features.simulation.actions): a module that adds one goes in
that list.

Administrators start simulations; stopping, resuming, interviewing, injecting events into one and
recording its real outcome belong to the person who started it and to administrators. A restart
interrupts the pipeline job; /resume continues at the first unfinished step, the run after its last
completed round.
"""
from __future__ import annotations

from bot.features.simulation import (
    agents,
    compare,
    control,
    fork,
    graph,
    inject,
    interview,
    outcome,
    report,
    reportchat,
    start,
    status,
)
from bot.features.simulation.actions import SimActions

# The order of /help: /simulate and /sims, then /sim, registered once the modules that add its
# actions have added them, then the other commands.
ADD_SIM_ACTIONS = [status, agents, control, inject, fork, outcome]
COMMANDS = [interview, report, reportchat, compare, graph]


def setup(app) -> None:
    start.setup(app)
    actions = SimActions()
    for module in ADD_SIM_ACTIONS:
        module.setup(app, actions)
    actions.register(app)
    for module in COMMANDS:
        module.setup(app)
