"""A simulation started without a document: its seed brief, kept as the simulation's document.

``/simulate <requirement>`` with no file has the LLM draft a brief from the requirement alone
(``draft``: the situation, the actors and where they stand, the open questions; a structured
answer with content checks). ``/simulate --world W`` and ``--from-chat`` take one from this chat's
memory instead (``from_memory``: a dated brief of who said what, as the asking channel's audience
reads it, through ``engine.memory.snapshot``). Either way the brief (``brief``) is written as
``documents/brief.md`` in the simulation's folder and the pipeline reads it like an attached file.

A brief from memory is a snapshot that stays answerable to its members: its lines are kept in the
database with the memory ids they came from (``store``), a member's later /forget removes their
lines from every brief not yet read by a run and rewrites the file, and a simulation whose run
had already read them records how many were forgotten since, for /sim status.
"""
