"""Memory scopes of simulations: ``sim:<sim_id>`` holds what a simulation's agents posted.

A simulation's discourse is remembered like a chat (engine.sim.sim_memory feeds it in), so it
gets topic worlds and the report agent searches it with recall. Such a scope belongs to the chat
scope that started the simulation, and every member of that scope may read it: its messages
carry no audience of their own.

The memory engine makes no LLM call for a simulation's scope (no belief extraction, worlds named
from their words): neither the simulation's estimate nor its budget counts such calls, and the
run already paid for every word of it.
"""
from __future__ import annotations

PREFIX = "sim:"


def sim_scope(sim_id: str) -> str:
    return PREFIX + sim_id


def is_sim_scope(scope: str) -> bool:
    return scope.startswith(PREFIX)
