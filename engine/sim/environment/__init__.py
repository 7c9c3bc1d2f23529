"""Step 3: the agent environment, everything the run reads.

``step`` chooses the agents, asks their personas (``personas``) and plans time and events;
``sizing`` decides how many agents and rounds a request becomes; ``models`` is the prepared
environment's format (``simulation_config.json`` and the camel-oasis profile files), which the
run's child process reads too: this package imports nothing heavy at its top.
"""
