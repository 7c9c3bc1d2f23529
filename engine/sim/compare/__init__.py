"""Two runs side by side (``/compare``), typically a parent and its fork.

``compare`` makes the comparison: ``runs`` reads both runs and what differs between them (where
they part: ``divergence``; how far each injected event travelled: ``travel``), ``charts`` draws
the overlays, ``narrative`` has the LLM write the cited narrative and ``writeup`` writes
compare.md and the chat summary.
"""
