"""A responder for FakeOpenAI that answers the stance classification requests
(engine.sim.stance.prompt) like a cooperative model: one score per user id listed in the
request, starting from the persona's stance (or the previous score) and drifting with the
round, so the split changes over a run. ``WithStances`` puts it in front of another responder.
"""
from __future__ import annotations

import json
import math
import re
import threading

from tests.fakes.openai_server import completion
from tests.fakes.sim_responder import _schema

PRIOR = {"supportive": 0.5, "opposing": -0.5, "neutral": 0.0, "observer": 0.0}
_USER = re.compile(r"^User (\d+) \(@[^)]*\), persona stance: (\w+)(?:; previous score ([+-]?[\d.]+))?", re.M)
_ROUND = re.compile(r"^Round (\d+) on (\w+)")


class StanceResponder:
    def __init__(self) -> None:
        self.calls = 0
        self.agents = 0   # agent scores answered, over all calls
        self._lock = threading.Lock()

    @staticmethod
    def handles(body: dict) -> bool:
        return set(_schema(body).get("properties", {})) == {"stances"}

    def __call__(self, body: dict) -> dict:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        found = _ROUND.search(user)
        round_no = int(found[1]) if found else 1
        stances = []
        for agent_id, persona, previous in _USER.findall(user):
            base = float(previous) if previous else PRIOR.get(persona, 0.0)
            score = max(-1.0, min(1.0, base + 0.3 * math.sin(int(agent_id) * 1.7 + round_no)))
            stances.append({"agent_id": int(agent_id), "score": round(score, 2)})
        with self._lock:
            self.calls += 1
            self.agents += len(stances)
        content = json.dumps({"stances": stances})
        prompt = sum(len(m.get("content") or "") for m in body["messages"])
        return completion(content, model=body.get("model", "fake"), prompt_tokens=prompt // 4 + 1,
                          completion_tokens=len(content) // 4 + 1)


class WithStances:
    """Stance requests to a ``StanceResponder`` (``stance``), everything else to ``answer``."""

    def __init__(self, answer, stance: StanceResponder | None = None):
        self.answer = answer
        self.stance = stance or StanceResponder()

    def __call__(self, body: dict):
        return self.stance(body) if StanceResponder.handles(body) else self.answer(body)
