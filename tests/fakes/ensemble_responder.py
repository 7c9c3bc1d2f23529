"""A seeded fake model for ensembles: runs whose outcome is known before they start.

Every agent request of a run carries the run's seed (OpenAI's ``seed``: engine.sim.run.child
sends it). ``SeededAgents`` answers an agent's tool request with a post whose words depend on that
seed: "I support ..." for the seeds in ``supporting``, "I oppose ..." for the others (and a text
answer to an interview); ``WordStances`` classifies each agent of a stance request by those words
(+0.8 for "support", -0.8 for "oppose", its previous score or persona prior otherwise). So a run
whose seed is in ``supporting`` ends for, every other against. ``EnsembleResponder`` routes the
rest of the pipeline as ``PipelineResponder`` does, and records the seeds it saw with the time of
their first and last agent step (``seen``; interviews left out), so a test can tell the runs
overlapped; each step's answer takes ``delay`` seconds, so a run lasts a few seconds.
"""
from __future__ import annotations

import json
import re
import threading
import time

from tests.fakes.openai_server import Raw, completion
from tests.fakes.report_responder import PipelineResponder
from tests.fakes.stance_responder import PRIOR, StanceResponder

_USER = re.compile(r"^User (\d+) \(@[^)]*\), persona stance: (\w+)(?:; previous score ([+-]?[\d.]+))?", re.M)


class SeededAgents:
    def __init__(self, supporting: set[int], delay: float = 0.3):
        self.supporting = supporting
        self.delay = delay
        self.seen: dict[int | None, list[float]] = {}   # seed -> [first, last] agent step
        self._lock = threading.Lock()
        self._n = 0

    def __call__(self, body: dict):
        seed = body.get("seed")
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        side = "support" if seed in self.supporting else "oppose"
        if not tools:
            return completion(f"I {side} the plan, as I posted.")
        now = time.monotonic()
        with self._lock:
            self.seen.setdefault(seed, [now, now])[1] = now + self.delay
            self._n += 1
            n = self._n
        if "create_post" in tools:
            answer = completion(tool_calls=[{"id": f"call_{n}", "name": "create_post",
                                             "arguments": {"content": f"I {side} the port automation, post {n}."}}])
        else:
            answer = completion(tool_calls=[{"id": f"call_{n}", "name": "do_nothing", "arguments": {}}])
        return Raw(200, answer, delay=self.delay)


class WordStances:
    def __init__(self):
        self.calls = 0

    def __call__(self, body: dict) -> dict:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        blocks = re.split(r"\n\n(?=User \d+ )", user.split("\n\n", 1)[-1])
        stances = []
        for block in blocks:
            found = _USER.search(block)
            if not found:
                continue
            agent_id, persona, previous = found.groups()
            score = float(previous) if previous else PRIOR.get(persona, 0.0)
            if "I support" in block:
                score = 0.8
            elif "I oppose" in block:
                score = -0.8
            stances.append({"agent_id": int(agent_id), "score": score})
        self.calls += 1
        return completion(json.dumps({"stances": stances}))


class EnsembleResponder(PipelineResponder):
    def __init__(self, supporting: set[int]):
        super().__init__()
        self.agents = SeededAgents(supporting)
        self.words = WordStances()

    def __call__(self, body: dict):
        if StanceResponder.handles(body):
            return self.words(body)
        if "seed" in body:   # a run's agent (or its interview)
            return self.agents(body)
        return super().__call__(body)
