"""Simulation pipeline: ontology -> graph -> environment -> run (camel-oasis) -> report.

``simulations`` is the facade the chat and the CLI reach simulations through; ``pipeline`` lists
the five steps, ``context`` what a step is given and ``records`` the simulation tables. The steps:

- ``ontology``: step 1, the entity and relation types;
- ``graph/``: step 2, the knowledge graph extracted from the documents, stored and searched;
- ``environment/``: step 3, the agents, their personas and the time and event plan;
- ``run/``: step 4, the run on camel-oasis in a child process (``run/child/``), its service,
  executors and output files;
- ``report/``: step 5, statistics, charts, diagnostics, the report agent, report chat, exports.

Around the runs: ``seed/`` (the brief a simulation starts from without a document: drafted by the
LLM, or taken from the chat's memory), ``stance/`` (each agent's belief per round), ``inject/``
(events injected into a run), ``compare/`` (two runs side by side), ``fork`` (a new run from a
parent's round), ``roster`` (the agents as /sim agents lists them), ``sim_memory`` (a run's posts
as searchable memory) and ``estimate`` (the cost before a start).
"""
