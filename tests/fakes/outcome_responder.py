"""A responder for FakeOpenAI that scores a forecast against its outcome (engine/sim/outcome.py).

``OutcomeResponder`` answers requests whose schema is the ``Verdict`` (score, summary, right, wrong,
runs) from what the prompt shows: each run listed ("Run 2:") gets a score and a reason, and "right"
cites the first post listed and round 1. It also misbehaves the ways the scoring must catch: with
``uncited_first`` its first answer cites nothing (the scoring asks again); every answer scores
above the scale (14 of 10), scores a run that does not exist (9), and cites a post no run has
([twitter post 999]) and a round past the last (round 42). ``prompts`` keeps each user prompt.
"""
from __future__ import annotations

import json
import re

from tests.fakes.openai_server import completion
from tests.fakes.sim_responder import _schema

VERDICT = {"score", "summary", "right", "wrong", "runs"}


class OutcomeResponder:
    def __init__(self, uncited_first: bool = True):
        self.uncited_first = uncited_first
        self.prompts: list[str] = []

    @staticmethod
    def handles(body: dict) -> bool:
        return set(_schema(body).get("properties", {})) == VERDICT

    def __call__(self, body: dict) -> dict:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        self.prompts.append(user)
        runs = [int(n) for n in re.findall(r"^Run (\d+):", user, re.M)]
        posts = re.findall(r"^- (\[[^\]]+ post \d+\])", user, re.M)
        if self.uncited_first and len(self.prompts) == 1:
            answer = {"score": 5, "summary": "The forecast was partly right about the outcome.",
                      "right": ["It expected a divided town."], "wrong": ["It missed the strike's end."],
                      "runs": [{"run": k, "score": 5, "reason": "Half of it happened."} for k in runs]}
        else:
            first = posts[0] if posts else "[twitter post 1]"
            answer = {"score": 14, "summary": "The forecast foresaw the opposition that carried the day.",
                      "right": [f"The opposition it showed from round 1 held, as {first} put it."],
                      "wrong": ["It expected a vote in round 42 that never came, citing [twitter post 999]."],
                      "runs": [{"run": k, "score": 7 + k, "reason": f"Run {k} ended as things did."} for k in runs]
                      + [{"run": 9, "score": 3, "reason": "A run that was never made."}]}
        content = json.dumps(answer)
        return completion(content, prompt_tokens=len(user) // 4 + 1, completion_tokens=len(content) // 4 + 1)
