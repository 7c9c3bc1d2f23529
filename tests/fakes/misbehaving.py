"""A misbehaving model in front of a cooperative responder (FakeOpenAI's ``responder``).

``Misbehaving(answer)`` spoils answers the way weak or overloaded models do:
  - structured answers (a JSON object as content): every 2nd one has each string value cut in
    half and followed by " ...oops" ("Organizatio ...oops"), every 3rd has each string replaced
    by "N/A"; both still parse and validate, so only content checks can tell;
  - agent tool calls: every 5th one carries arguments that are not JSON (the agent's next request,
    its retry, is answered well),
    and with ``break_first_agent`` every call of the first agent that asks does, so that agent's
    steps always fail (``broken_agent`` is its system prompt);
  - ``status_every``: every n-th request gets an HTTP 500 instead.
``spoiled`` counts what was spoiled, by kind.
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any, Callable

from tests.fakes.openai_server import Raw


def _mangle(value: Any, how: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {k: _mangle(v, how) for k, v in value.items()}
    if isinstance(value, list):
        return [_mangle(v, how) for v in value]
    return how(value) if isinstance(value, str) else value


def oops(text: str) -> str:
    return f"{text[: max(1, len(text) // 2)]} ...oops"


class Misbehaving:
    def __init__(self, answer: Callable[[dict], Any], break_first_agent: bool = False, status_every: int = 0):
        self.answer = answer
        self.break_first_agent = break_first_agent
        self.broken_agent: str | None = None
        self._spoilt_last: set[str] = set()   # agents (system prompts) whose last call was spoilt
        self.status_every = status_every
        self.spoiled: Counter[str] = Counter()
        self._structured = self._tools = self._all = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Any:
        with self._lock:
            self._all += 1
            if self.status_every and self._all % self.status_every == 0:
                self.spoiled["500"] += 1
                return Raw(500, {"error": {"message": "the model crashed", "type": "server_error"}})
        answer = self.answer(body)
        if isinstance(answer, dict) and answer.get("choices"):
            message = answer["choices"][0]["message"]
            if message.get("tool_calls") and not _is_report(body):
                return self._tool_call(body, answer)
            if isinstance(message.get("content"), str) and message["content"].lstrip().startswith("{"):
                return self._structured_answer(answer)
        return answer

    def _structured_answer(self, answer: dict) -> dict:
        with self._lock:
            self._structured += 1
            n = self._structured
        how = oops if n % 2 == 0 else (lambda s: "N/A") if n % 3 == 0 else None
        if how is None:
            return answer
        self.spoiled["structured"] += 1
        message = answer["choices"][0]["message"]
        message["content"] = json.dumps(_mangle(json.loads(message["content"]), how))
        return answer

    def _tool_call(self, body: dict, answer: dict) -> dict:
        system = str((body.get("messages") or [{}])[0].get("content"))
        with self._lock:
            self._tools += 1
            n = self._tools
            if self.break_first_agent and self.broken_agent is None:
                self.broken_agent = system
            retry = system in self._spoilt_last
            self._spoilt_last.discard(system)
            spoil = system == self.broken_agent or (n % 5 == 0 and not retry)
            if spoil:
                self._spoilt_last.add(system)
        if spoil:
            self.spoiled["tool_call"] += 1
            for call in answer["choices"][0]["message"]["tool_calls"]:
                call["function"]["arguments"] = '{"content": "half a post'
        return answer


def _is_report(body: dict) -> bool:
    return any(t["function"]["name"] == "insight_forge" for t in body.get("tools") or [])
