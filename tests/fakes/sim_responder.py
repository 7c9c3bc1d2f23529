"""A responder for FakeOpenAI that answers the simulation pipeline's structured requests with
valid content derived from the request itself, so steps 1-3 run end to end offline.

It recognises the request by its JSON schema (response_format, or the schema quoted in the
prompt by the weaker modes): ontology, chunk extraction, persona batches, members of the public
(the crowd's batches: as many people per group as the request lists), event plans, and the seed
brief drafted from a requirement alone (named actors of a harbour dispute). Names
are taken from the text it is given (capitalised word sequences), so the graph reflects the
document. Token usage is reported as characters / 4, like a real tokenizer roughly would.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from tests.fakes.openai_server import completion

_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+(?:of\s+(?:the\s+)?)?[A-Z][a-z]+)+")
_ORG = {"union", "logistics", "council", "chamber", "university", "ministry", "herald", "alliance",
        "government", "port", "company", "party", "group", "commerce"}


def _schema(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    for m in body["messages"]:
        text = m.get("content") or ""
        if m["role"] == "system" and "JSON schema:" in text:
            return json.loads(text.split("JSON schema:", 1)[1].strip())
    return {}


def _user(body: dict) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "user"), "")


def _system(body: dict) -> str:
    return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")


def kind_of(body: dict) -> str:
    props = set(_schema(body).get("properties", {}))
    if "entity_types" in props:
        return "ontology"
    if {"entities", "relations"} <= props:
        return "extraction"
    if "personas" in props:
        return "personas"
    if "people" in props:
        return "crowd"
    if "hot_topics" in props:
        return "events"
    if "open_questions" in props:
        return "brief"
    return "chat"


def ontology(_body: dict) -> dict:
    return {
        "entity_types": [
            {"name": "labor union", "description": "Unions of workers", "examples": ["Dockworkers Union"],
             "attributes": [{"name": "name", "description": "reserved, must be renamed"},
                            {"name": "members", "description": "member count"}]},
            {"name": "Company", "description": "Businesses", "examples": [],
             "attributes": [{"name": "industry", "description": ""}]},
            {"name": "Politician", "description": "Elected officials", "examples": [],
             "attributes": [{"name": "office", "description": ""}, {"name": "party", "description": ""},
                            {"name": "uuid", "description": ""}, {"name": "district", "description": ""}]},
            {"name": "MediaOutlet", "description": "Newspapers and broadcasters", "examples": [], "attributes": []},
            {"name": "Resident", "description": "People who live in Valmora", "examples": [],
             "attributes": [{"name": "district", "description": ""}]},
            {"name": "Dock Worker", "description": "People who work at the port", "examples": [], "attributes": []},
            {"name": "Policy", "description": "an abstract concept, must be dropped", "examples": [], "attributes": []},
            {"name": "Person", "description": "the LLM's own wording for people", "examples": [], "attributes": []},
        ],
        "relation_types": [
            {"name": "opposes", "description": "is against", "source_types": ["Person", "labor union"],
             "target_types": ["Company", "Nonexistent"]},
            {"name": "SUPPORTS", "description": "backs", "source_types": ["Politician"], "target_types": []},
            {"name": "mentions", "description": "talks about", "source_types": [], "target_types": []},
        ],
        "summary": "A dockworkers' strike against port automation in Valmora.",
    }


def _type_for(name: str, system: str) -> str:
    words = set(name.lower().split())
    if "union" in words and "LaborUnion" in system:
        return "LaborUnion"
    if "logistics" in words and "Company" in system:
        return "Company"
    if words & _ORG:
        return "Organization"
    return "Person"


def extraction(body: dict) -> dict:
    text = _user(body).split("\n\n", 1)[-1]
    system = _system(body)
    relation_names = re.findall(r"^- ([A-Z_]+):", system.split("Relation types:", 1)[-1], re.M) or ["RELATES_TO"]
    found = [m.group(0) for m in _NAME.finditer(text)]
    surnames = {n.split()[-1] for n in found if len(n.split()) >= 2}
    found += [w for w in re.findall(r"\b[A-Z][a-z]{3,}\b", text) if w in surnames]
    names = list(dict.fromkeys(found))
    entities = [{"name": n, "type": _type_for(n, system), "summary": _sentence_with(text, n)[:160],
                 "attributes": []} for n in names]
    relations = []
    for i, sentence in enumerate(re.split(r"(?<=[.!?])\s+", text)):
        present = [n for n in names if n in sentence]
        for other in present[1:3]:
            relations.append({"source": present[0], "relation": relation_names[i % len(relation_names)],
                              "target": other, "fact": sentence.strip()[:200],
                              "valid_at": "2026-03-03" if "Monday" in sentence else "", "invalid_at": ""})
    return {"entities": entities, "relations": relations}


def _sentence_with(text: str, name: str) -> str:
    return next((s for s in re.split(r"(?<=[.!?])\s+", text) if name in s), f"{name} is mentioned.")


def personas(body: dict) -> dict:
    rows = re.findall(r"^- (.+?) \[([^\]]+)\]:", _user(body), re.M)
    out = []
    for i, (name, etype) in enumerate(rows):
        org = etype != "Person" and etype != "Politician"
        out.append({"entity_name": name, "age": 30 + i, "gender": "other" if org else ("female" if i % 2 else "male"),
                    "mbti": ["INTJ", "ENFP", "ISTJ", "xxxx"][i % 4], "country": "Valmora",
                    "profession": etype.lower(), "interests": ["port", "jobs"],
                    "bio": f"{name}, {etype.lower()} in Valmora.", "persona": f"{name} cares about the port.",
                    "stance": ["supportive", "opposing", "neutral", "undecided"][i % 4],
                    "activity_level": 0.2 + 0.1 * (i % 8), "posts_per_hour": 1.5,
                    "active_hours": [*range(7, 23), 25], "response_delay_rounds": i % 3})
    return {"personas": out}


FIRST = ["Ana", "Bo", "Cai", "Dina", "Ed", "Fei", "Gil", "Hugo", "Ida", "Jon", "Kai", "Lea", "Mo", "Nia", "Oto"]


def crowd(body: dict) -> dict:
    """The people asked for, by group ("- resident: 3"), each different: name, stance, activity."""
    wanted = re.findall(r"^- (.+?): (\d+)$", _user(body), re.M)
    people: list[dict] = []
    for group, n in wanted:
        for _ in range(int(n)):
            i = len(people)
            people.append({"entity_name": f"{FIRST[i % len(FIRST)]} {group.title()}{i}", "group": group,
                           "age": 20 + 3 * i % 60, "gender": ["female", "male"][i % 2],
                           "mbti": ["ISFJ", "ENTP", "INFP", "ESTJ"][i % 4], "country": "Valmora",
                           "profession": group, "interests": ["port", "rent"],
                           "bio": f"A {group} of Valmora, number {i}.",
                           "persona": f"A {group} who worries about the port, voice number {i}.",
                           "stance": ["supportive", "opposing", "neutral", "observer"][i % 4],
                           "activity_level": round(0.1 + 0.8 * ((i * 37) % 10) / 10, 2),
                           "posts_per_hour": 0.5, "active_hours": list(range(8, 22)),
                           "response_delay_rounds": i % 3})
    return {"people": people}


def events(body: dict) -> dict:
    names = re.findall(r"^- (.+?) \[", _user(body), re.M)
    return {"narrative": "Valmora argues about automating its port.",
            "hot_topics": ["#SaveValmoraDocks", "automation", "jobs"],
            "initial_posts": [{"agent_name": n, "content": f"{n}: the port must stay ours.", "hour": 0}
                              for n in names[:2]] + [{"agent_name": "Nobody Known", "content": "x", "hour": 0}],
            "scheduled_events": [{"agent_name": names[-1], "content": "Talks resume on 10 March.", "hour": 3},
                                 {"agent_name": names[0], "content": "too late", "hour": 10_000}]}


def brief(body: dict) -> dict:
    question = _user(body).split(":", 1)[-1].strip()
    return {"title": "Valmora Port Faces a Strike Vote",
            "situation": f"In Valmora, a harbour town, the question is: {question} The Dockworkers Union meets "
                         "Maria Lopez of Harbor Logistics on Monday while the Valmora Council watches.",
            "actors": [{"name": "Dockworkers Union", "kind": "organisation",
                        "position": "Against automation: the union fears for its members' jobs."},
                       {"name": "Harbor Logistics", "kind": "organisation",
                        "position": "For automation: the company wants faster cranes."},
                       {"name": "Maria Lopez", "kind": "person",
                        "position": "The company's negotiator, looking for a compromise."},
                       {"name": "Valmora Council", "kind": "organisation",
                        "position": "Neutral: the council wants the port open."}],
            "open_questions": ["Will the union strike?", "Who will the town side with?"]}


ANSWERS = {"ontology": ontology, "extraction": extraction, "personas": personas, "crowd": crowd, "events": events,
           "brief": brief}


class SimResponder:
    """Callable responder; ``counts`` tallies requests by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, body: dict) -> Any:
        kind = kind_of(body)
        self.counts[kind] += 1
        content = json.dumps(ANSWERS[kind](body)) if kind in ANSWERS else "ok"
        prompt_chars = sum(len(m.get("content") or "") for m in body["messages"])
        return completion(content, model=body.get("model", "fake"), prompt_tokens=prompt_chars // 4 + 1,
                          completion_tokens=len(content) // 4 + 1)
