"""What runs only inside a run's child process, never in the bot's.

``main`` is the process (``python engine/sim/run/child/main.py <folder>``, started by
``engine.sim.run.executor``): both platforms in one asyncio loop. ``oasis_import`` and
``oasis_setup`` load camel-oasis offline and quietly, ``injector`` publishes injected events on
time, ``masked_output`` masks secrets in what the process writes to ``run.log``. What the child
shares with the bot process (the protocol, the output files, the schedule, usage and fork
points) lives one level up, in ``engine.sim.run``.
"""
