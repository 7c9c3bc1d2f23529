"""Ensembles: one simulation, its step 4 run N times with different seeds, one answer with its spread.

``/simulate --runs N`` (the CLI's ``--runs``) runs steps 1-3 once; step 4 then runs N runs of the
same prepared environment, each a simulation of its own (``members``): id ``<head>-r<K>``, folder
``<head folder>/runs/<K>/``, the head's steps 1-3 shared (files linked, graph rows copied, as a fork
shares them), its own seed (``members.run_seed``: run 1 the simulation's seed, run K one derived
from it; it drives who acts when and the recommenders, and is sent to the model as its sampling
seed). Everything that works on a run (stances, memory, interviews, exports, forks, reports)
works on each run unchanged; the head has no run of its own.

- ``run``: step 4 of the head: the N runs, ``parallel_runs`` at once (separate actors on Ray),
  their LLM usage counted against the head's one job, its caps and budget.
- ``spread``: the maths over the runs' belief splits (median and range per round, how many runs
  end for / against / neutral, the round where they part, the majority and the outliers, the
  confidence line, the median-most run); free functions over plain values.
- ``report``: what the head's report, ``/sim status``, ``/compare``, ``/report ask`` and the
  exports read: the runs loaded from the database and their folders, the ensemble section and its
  charts with bands (``charts``), and the report agent's ``ensemble_runs`` tool.

Nothing is presented as more certain than the runs agree: every figure comes with its range and
the confidence line says how many runs agree, and on what.
"""
