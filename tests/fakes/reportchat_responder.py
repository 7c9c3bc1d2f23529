"""A responder for FakeOpenAI that plays the report agent answering questions in the chat.

``ReportChatResponder`` answers requests of report chat (engine/sim/report/chat.py: the system
prompt starts "You are the report agent"). On the first turn of a question it calls tools:
quick_search for the question, simulation_statistics, belief_series and interview_agents
(@bob); then it answers citing what those tools returned (read back from the tool messages),
one citation no tool gave ([fact 999]) and, when the chat had earlier questions, the first of
them. Persona interviews get a short in-character line; anything else is an error.
``questions`` lists the questions it answered, in order.
"""
from __future__ import annotations

import json

from tests.fakes.openai_server import completion

PERSONA_ANSWER = "I switched to my bike; the fare hike made the bus too dear."


class ReportChatResponder:
    def __init__(self):
        self.questions: list[str] = []

    def __call__(self, body: dict):
        messages = body["messages"]
        system = messages[0].get("content") or ""
        if "taking part in a social-media simulation" in system:
            return PERSONA_ANSWER
        if not system.startswith("You are the report agent"):
            raise AssertionError(f"unexpected request: {system[:80]}")
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user"
                        and not m["content"].startswith("Answer the question now"))
        question = messages[last_user]["content"]
        gathered = [m for m in messages[last_user + 1:] if m["role"] == "tool"]
        if not gathered and body.get("tool_choice") != "none":
            return completion(tool_calls=[
                {"id": "q1", "name": "quick_search", "arguments": {"query": question}},
                {"id": "s1", "name": "simulation_statistics", "arguments": {"focus": "overview", "top": 3}},
                {"id": "b1", "name": "belief_series", "arguments": {}},
                {"id": "i1", "name": "interview_agents",
                 "arguments": {"question": "Will you keep taking the bus?", "agents": ["@bob"]}}])
        self.questions.append(question)
        results = {m["tool_call_id"]: json.loads(m["content"]) for m in gathered}
        parts = []
        earlier = [m["content"] for m in messages[1:last_user] if m["role"] == "user"]
        if earlier:
            parts.append(f"Following up on \"{earlier[0]}\":")
        facts = results.get("q1", {}).get("facts") or []
        if facts:
            parts.append(f"{facts[0]['fact']} {facts[0]['cite']}.")
        posts = results.get("s1", {}).get("top_posts") or []
        if posts:
            parts.append(f"The most engaged post was {posts[0]['cite']}.")
        beliefs = results.get("b1", {})
        if beliefs.get("tracked"):
            last = beliefs["rounds"][-1]
            parts.append(f"By round {last['round']} on {last['platform']}, {last['for']} agents were for and "
                         f"{last['against']} against.")
        elif beliefs:
            parts.append("Stances were not tracked in this run.")
        answers = results.get("i1", {}).get("answers") or []
        if answers:
            parts.append(f"{answers[0]['cite']} said: \"{answers[0]['answer']}\"")
        parts.append("The report already showed [twitter post 9]; I also recall [fact 999].")
        return completion(" ".join(parts))
