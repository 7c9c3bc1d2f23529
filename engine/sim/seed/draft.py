"""A seed brief drafted by the LLM from the requirement alone (``/simulate <requirement>``, no file).

One structured call asks for the situation the requirement implies, the actors who would speak
about it with where each stands, and the open questions. The answer is checked for content, not
only shape (engine.llm.content_checks): no empty, placeholder or cut-off text, no piece of the
schema echoed back; each actor is an item that fails alone, and at least two must be usable. The
brief says plainly that it was drafted by the model, so the report cannot pass it off as facts.

``messages`` is also what the estimate counts for this call (engine.sim.estimate).
"""
from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from engine import language
from engine.i18n import _
from engine.jobs import JobError
from engine.llm import LLMClient
from engine.llm.content_checks import ContentChecks
from engine.memory.models import utcnow
from engine.sim.seed.brief import Brief
from engine.words import plural

ACTIVITY = "simulation.brief"   # the call's usage is filed under this (it comes before any job)
ANSWER_TOKENS = 900             # the answer's max_tokens: a brief is one page
MIN_ACTORS = 2

SYSTEM = """You prepare the seed document of a social-media simulation. A user asked what the \
simulation should predict, and gave no document: draft a short, plausible brief from the question \
alone, the document the simulation will start from.
Return:
- title: a headline for the situation;
- situation: one paragraph (60-150 words) on what is happening, where and when, as the question implies;
- actors: 4 to 10 named people, organisations or groups who would speak about it on social media, \
each with kind (person, organisation or group) and position: where they stand and why, in one or two sentences;
- open_questions: 2 to 5 questions the simulation should answer.
Invent plausible specifics where the question leaves them open, but nothing that contradicts it. \
Write in the language of the question."""


class Actor(BaseModel):
    name: str
    kind: str
    position: str


class DraftedBrief(BaseModel):
    title: str
    situation: str
    actors: list[Actor] = Field(min_length=1)
    open_questions: list[str] = Field(min_length=1)


CHECKS = ContentChecks(texts=("title", "situation", "actors[].name", "actors[].kind", "actors[].position",
                              "open_questions[]"), items=("actors",))


def messages(requirement: str, lang: str | None = None) -> list[dict]:
    """The drafting request: in the question's language, or in ``lang`` when one was asked (--lang)."""
    system = SYSTEM if lang is None else f"{SYSTEM}\n{language.answer_in(lang)}"
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"What the simulation should predict: {requirement.strip()}"}]


def render(answer: DraftedBrief, requirement: str, when: datetime) -> str:
    """The brief as the Markdown document the pipeline reads."""
    lines = [f"# {answer.title.strip()}", "",
             f"Drafted by an LLM on {when:%Y-%m-%d} from the question “{requirement.strip()}”, with no document "
             "given: a plausible starting point, not a record of what happened.", "",
             "## The situation", "", answer.situation.strip(), "",
             "## Who is involved and where they stand", ""]
    lines += [f"- {a.name.strip()} ({a.kind.strip()}): {a.position.strip()}" for a in answer.actors]
    lines += ["", "## Open questions", ""]
    lines += [f"- {q.strip()}" for q in answer.open_questions]
    return "\n".join(lines) + "\n"


async def draft(llm: LLMClient, requirement: str, scope: str, lang: str | None = None) -> Brief:
    """Ask the LLM for the brief (its usage counted against ``scope`` and the asker, budgets holding),
    written in ``lang`` when given, else in the question's language."""
    answer = await llm.structured(DraftedBrief, messages(requirement, lang), checks=CHECKS, scope=scope,
                                  activity=ACTIVITY, max_tokens=ANSWER_TOKENS)
    if len(answer.actors) < MIN_ACTORS:
        raise JobError(_("the LLM drafted a brief with {actors}; a simulation needs at least {least}. Try again, or "
                         "attach a document.", actors=plural(len(answer.actors), "{n} usable actor",
                                                             "{n} usable actors"), least=MIN_ACTORS))
    when = utcnow()
    return Brief("drafted", requirement.strip(), when, body=render(answer, requirement, when))
