"""Step 4: run a prepared simulation on camel-oasis's Twitter and Reddit, with control and interviews.

- ``child``: the run's own process (both platforms in one asyncio loop), JSON lines on stdin/stdout;
- ``executor``: how the engine starts, follows, asks and stops such a process (local: asyncio);
- ``service``: runs as the engine sees them, persisted in the ``sim_runs`` table; interviews;
- ``usage_log`` and ``accounting``: the LLM usage a child logs and reports as it goes, recorded
  once against the run's job and scope, and the budget caps that stop a run.
"""
