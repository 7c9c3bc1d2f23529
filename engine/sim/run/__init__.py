"""Step 4: run a prepared simulation on camel-oasis's Twitter and Reddit, with control and interviews.

- ``child/``: the run's own process (both platforms in one asyncio loop), JSON lines on stdin/stdout;
- ``protocol``: those JSON lines, and the spec a child is started with;
- ``output``: the files a run writes (``actions.jsonl`` and its rows, the platform databases,
  checkpoints) and what counts as an agent's action; every reader of a run goes through it;
- ``executor`` (and ``ray_executor``): how the engine starts, follows, asks and stops such a
  process (local: asyncio; several machines: Ray);
- ``service``: runs as the engine sees them, persisted in the ``sim_runs`` table; interviews;
- ``step``: the pipeline's step 4 over that service; ``observers``: what the bot process does
  with each completed round;
- ``schedule``: who acts when (the child follows it, the estimate counts with it);
- ``injections``: the events queued for the child to publish (``injections.json``);
- ``fork_points``: each round's state, kept by the child for forks;
- ``usage_log`` and ``accounting``: the LLM usage a child logs and reports as it goes, recorded
  once against the run's job and scope, and the budget caps that stop a run.
"""
