"""Beliefs per round: each agent's stance towards the requirement's subject.

``tracking`` classifies every completed round as a round observer and keeps the rows in
``sim_stances``; ``prompt`` is the classification request; ``history`` reads all of a
simulation's stances at once for exports and comparisons.
"""
