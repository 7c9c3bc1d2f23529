"""Responders for FakeOpenAI that let the whole pipeline run offline.

``ReportWriter`` plays the report agent's model the way a cooperative one would: it plans an
outline, then per section asks for statistics and a deep search (and, in an ensemble's report,
every run through ``ensemble_runs``), interviews agents (choosing the first ones it is shown,
each with a reason and a question), and writes text that cites what those tools actually
returned (read back from the tool messages).
``PipelineResponder`` routes each request: steps 1-3 to ``SimResponder``, the report to
``ReportWriter``, the stance classification of each round to ``StanceResponder``, and
everything else (camel-oasis agents and their interviews) to ``SocialResponder``.
"""
from __future__ import annotations

import json
import re
import threading

from tests.fakes.openai_server import SocialResponder, completion
from tests.fakes.sim_responder import SimResponder, kind_of
from tests.fakes.stance_responder import StanceResponder


def _schema_props(body: dict) -> set[str]:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return set(fmt["json_schema"]["schema"].get("properties", {}))
    for m in body["messages"]:
        text = m.get("content") or ""
        if m["role"] == "system" and "JSON schema:" in text:
            return set(json.loads(text.split("JSON schema:", 1)[1].strip()).get("properties", {}))
    return set()


class ReportWriter:
    def __init__(self):
        self.counts = {"outline": 0, "split": 0, "turns": 0, "summary": 0, "persona": 0, "choice": 0}
        self._lock = threading.Lock()

    @staticmethod
    def handles(body: dict) -> bool:
        props = _schema_props(body)
        system = body["messages"][0].get("content") or ""
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        return (props in ({"title", "sections"}, {"queries"}, {"picks"}) or "insight_forge" in tools
                or system.startswith("Summarise") or "taking part in a social-media simulation" in system)

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def __call__(self, body: dict):
        props = _schema_props(body)
        system = body["messages"][0].get("content") or ""
        if props == {"title", "sections"}:
            self._count("outline")
            return json.dumps({"title": "What the simulation predicts", "sections": [
                {"title": "How the discussion unfolded", "focus": "Who posted what and what drew engagement"},
                {"title": "What agents expect next", "focus": "How the actors expect events to develop"}]})
        if props == {"queries"}:
            self._count("split")
            question = body["messages"][-1]["content"]
            return json.dumps({"queries": [f"{question} actors", f"{question} consequences"]})
        if props == {"picks"}:   # whom to interview: the first agents listed, up to the count asked
            self._count("choice")
            asked = re.search(r"Pick at most (\d+)", system)
            count = int(asked.group(1)) if asked else 0
            names = re.findall(r"^- @(\S+) \(", body["messages"][-1]["content"], re.M)[:count]
            return json.dumps({"picks": [{"username": n, "reason": f"@{n} took part in the discussion.",
                                          "question": f"@{n}, what do you expect to happen next?"} for n in names]})
        if system.startswith("Summarise"):
            self._count("summary")
            return "The simulation predicts a divided response; the most engaged posts set the tone."
        if "taking part in a social-media simulation" in system:
            self._count("persona")
            return "I said what I think in my posts and I stand by it."
        self._count("turns")
        return self._turn(body)

    def _turn(self, body: dict):
        messages = body["messages"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        focus = messages[1]["content"].rsplit(": ", 1)[-1]
        if turn == 0:
            tools = {t["function"]["name"] for t in body.get("tools") or []}
            runs = [{"id": "runs", "name": "ensemble_runs", "arguments": {}}] if "ensemble_runs" in tools else []
            return completion(tool_calls=[
                {"id": "stats", "name": "simulation_statistics", "arguments": {"focus": "overview", "top": 3}},
                {"id": "forge", "name": "insight_forge", "arguments": {"question": focus}}, *runs])
        if turn == 1:
            return completion(tool_calls=[{"id": "ask", "name": "interview_agents",
                                           "arguments": {"question": "What do you expect to happen next?",
                                                         "count": 2}}])
        results = {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}
        parts = []
        posts = results.get("stats", {}).get("top_posts") or []
        if posts:
            top = posts[0]
            parts.append(f"The most engaged post was by @{top['author']} {top['cite']} "
                         f"({top['likes']} likes, {top['comments']} comments, {top['reposts']} reposts).")
        facts = results.get("forge", {}).get("facts") or []
        if facts:
            parts.append(f"The background: {facts[0]['fact']} {facts[0]['cite']}.")
        for run in results.get("runs", {}).get("per_run") or []:
            if run["top_posts"]:
                post = run["top_posts"][0]
                parts.append(f"In run {run['run']}, which ends {run['ends']}, {post['author']} wrote the most "
                             f"engaged post {post['cite']}.")
                break
        answers = results.get("ask", {}).get("answers") or []
        for a in answers[:2]:
            parts.append(f"Asked what comes next, {a['cite']} said: \"{a['answer'][:160]}\"")
        return completion(" ".join(parts) or "The run gave little to report.")


class PipelineResponder:
    def __init__(self, delay: float = 0.0):
        self.sim = SimResponder()
        self.report = ReportWriter()
        self.social = SocialResponder(delay)
        self.stance = StanceResponder()

    def __call__(self, body: dict):
        if StanceResponder.handles(body):
            return self.stance(body)
        if ReportWriter.handles(body):
            return self.report(body)
        if kind_of(body) != "chat":
            return self.sim(body)
        return self.social(body)
