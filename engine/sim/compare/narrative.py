"""The comparison's short narrative, written by the LLM, with its citations checked.

Every claim is to cite posts of the simulation it comes from, ``[A twitter post 12]`` or
``[B reddit post 3]``. A citation is verified against that run's platform database (the
posts its statistics read); one its run does not have, or one that names no run
(``[twitter post 3]``), is marked "⚠ unverified" in the text and listed, as the report agent
does for citations no tool returned. One chat request, counted against the job and scope;
without an LLM, or when a budget is reached or the endpoint fails, there is no narrative and
``note`` says why.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from engine import language
from engine.i18n import _
from engine.llm.errors import BudgetExceeded, LLMError
from engine.words import plural

log = logging.getLogger(__name__)

CITATION = re.compile(r"\[(?:([AB]) )?(twitter|reddit) post (\d+)\]")
UNVERIFIED = " ⚠ unverified"

WRITER = """You compare two runs, A and B, of a multi-agent social-media simulation (Twitter-like and \
Reddit-like platforms); B is typically a fork of A from a given round, possibly with an injected event.
From the JSON facts, write a short narrative (120-250 words, Markdown, no headings): where the \
futures part, how activity and beliefs differ, which agents changed most, and how far any injected \
event travelled. Every claim about a post must cite it exactly as the facts give it, with the \
run's letter: [A twitter post 12] for a post of run A, [B reddit post 3] for run B. Cite only posts \
listed in the facts, each with the letter of the run it belongs to. Do not invent figures."""


@dataclass
class Narrative:
    text: str = ""
    note: str = ""
    cited: list[str] = field(default_factory=list)          # in order of first use
    unverified: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)   # verified citation -> "@author: text"


def check_citations(text: str, runs) -> Narrative:
    """Mark the citations of ``text`` that name no post of their run; ``runs`` are the two Runs."""
    by_letter = {r.letter: r for r in runs}
    narrative = Narrative()

    def mark(m: re.Match) -> str:
        letter, platform, post_id = m.group(1), m.group(2), int(m.group(3))
        cite = m.group(0)
        if cite not in narrative.cited:
            narrative.cited.append(cite)
        post = by_letter[letter].stats.find_post(platform, post_id) if letter in by_letter else None
        if post is None:
            if cite not in narrative.unverified:
                narrative.unverified.append(cite)
            return cite + UNVERIFIED
        narrative.sources[cite] = f"@{post.author}: \"{' '.join(post.content.split())[:200]}\""
        return cite

    narrative.text = CITATION.sub(mark, text)
    return narrative


async def write_narrative(llm, cmp, facts: dict, *, job: str | None = None, scope: str | None = None,
                          lang: str = language.DEFAULT) -> Narrative:
    """The narrative of comparison ``cmp`` from its ``facts``, written in ``lang``."""
    if llm is None:
        return Narrative(note=_("No LLM is configured ([llm] base_url): the comparison is written without "
                                "its narrative."))
    try:
        text = await llm.chat([{"role": "system", "content": f"{WRITER}\n{language.answer_in(lang)}"},
                               {"role": "user", "content": json.dumps(facts, ensure_ascii=False)[:24000]}],
                              job=job, scope=scope, language=lang)
    except BudgetExceeded as err:
        return Narrative(note=_("No narrative: {reason}", reason=err))
    except LLMError as err:
        log.warning("comparison narrative failed: %s", err)
        return Narrative(note=_("No narrative: the LLM failed ({error}).", error=err))
    narrative = check_citations(text.strip(), cmp.runs)
    if narrative.unverified:
        narrative.note = plural(len(narrative.unverified),
                                "{n} citation names no post of its simulation and is marked ⚠ unverified: {cites}.",
                                "{n} citations name no post of their simulation and are marked ⚠ unverified: "
                                "{cites}.", cites=", ".join(narrative.unverified))
    if not narrative.text:
        narrative.note = _("The LLM gave no narrative.")
    return narrative
