"""The JSON-lines protocol between the bot and a run's child process, and the spec the child is
started with (``run_spec.json``). The files a run writes are described in ``output``.

Parent -> child (stdin), one object per line, each with an ``id`` the reply echoes:
  {"id": "r1", "type": "interview", "question": "...", "agent_ids": [0, 3] | null,
   "platforms": ["twitter", "reddit"]}
  {"id": "r2", "type": "stop", "reason": "..."}   finish the current round, then end (no idle
                                  time); the optional reason becomes the run's stop reason
  {"id": "r3", "type": "close"}   end the idle time after the last round now
  {"id": "r4", "type": "ping"}
  {"id": "r5", "type": "inject"}  ``injections.json`` changed: re-read it now; the reply names, per
                                  platform, the events whose round has begun without them,
                                  {"late": {"twitter": [id, ...]}} (they go out at the next round)
Child -> parent (stdout): events ``ready``, ``setup``, ``round_start``, ``injected`` (an
injected event was published: ``round`` from 0, ``id``, ``source``, ``text``, ``asked_by``,
``post_id``, ``platform``), ``round_end``, ``usage``, ``simulation_end``, ``idle``, ``error``,
``done`` and replies
  {"type": "reply", "id": "r1", "ok": true, "answers": [...]} / {"ok": false, "error": "..."}.
``usage`` events (at most one a second), ``round_end``, ``done`` and interview replies carry
``"usage": {"process", "calls", "prompt_tokens", "completion_tokens"}``, the child process's
cumulative LLM usage (see ``usage_log``).
End of input on stdin means the parent is gone: the child stops at the end of the round.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.sim.run.output import PLATFORMS

SPEC_FILE = "run_spec.json"


def encode(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, default=str) + "\n").encode("utf-8")


@dataclass
class RunSpec:
    """What the child needs besides the simulation folder (written to ``run_spec.json``)."""
    base_url: str
    model: str
    api_key_env: str = ""          # name of the environment variable holding the key
    mode: str = "start"            # start (fresh), resume (from checkpoints), reopen (interviews only)
    max_rounds: int = 0            # 0: the environment's own round count
    idle_s: float = 600.0          # environment kept open for interviews after the last round
    memory_rounds: int = 5         # LLM steps each agent remembers
    max_steps_per_round: int = 3   # LLM steps an active agent takes in one round at most
    follow_density: float = 0.2    # seeded follow graph, scaled by influence
    llm_concurrency: int = 64
    timeout_s: float = 120.0
    context_tokens: int = 8192    # an agent's context budget (camel trims older memory beyond it)
    log_level: str = "WARNING"
    # LLM budget the run may still spend: [{"cap": "llm.job_budget_tokens", "unit": "tokens" | "usd",
    # "left": 1234}], and the model's price (USD per 1M prompt, completion tokens) for the usd caps
    caps: list[dict] = field(default_factory=list)
    price: list[float] = field(default_factory=lambda: [0.0, 0.0])
    platforms: list[str] = field(default_factory=lambda: list(PLATFORMS))
    fork_points_mb: float = 512.0  # disk budget of the per-round fork points (0: keep none)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "RunSpec":
        return cls(**json.loads(text))
