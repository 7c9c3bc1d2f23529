"""Step 5: the report, and what else is made from a run's output.

Statistics (``stats``) and charts (``charts``, ``belief_charts``) of the run, its quality
diagnostics (``diagnostics``), the tools and sources of the report agent (``tools``, ``sources``,
``post_search``) and the agent that plans and writes ``report.md`` (``agent``, ``loop``, run by
``step``); questions asked of a written report (``chat``, ``chat_store``); the run's exports,
trajectory and transcript (``export``).
"""
