"""The /ask prompt: answer from what recall found (engine.memory.retrieval), across worlds,
citing messages [M..] and beliefs [B..]; the model is told to say when they hold no answer, and
which language to answer in (the asker's: engine.memory.languages)."""
from __future__ import annotations

from engine import language
from engine.memory.models import RecallResult


def ask_prompt(question: str, result: RecallResult, lang: str) -> list[dict]:
    """The /ask prompt: the beliefs and messages recall found, across worlds, each tagged; the
    answer in language ``lang``."""
    facts = "\n".join(f"[B{b.id}] {b.text()} (confidence {b.confidence:.2f}; topic: "
                      f"{result.worlds[b.world_id].topic if b.world_id in result.worlds else ''})"
                      for b in result.beliefs)
    msgs = "\n".join(f"[M{e.id}] {e.author} ({e.ts:%Y-%m-%d %H:%M}, topic: {e.world_topic}): {e.text}"
                     for e in result.evidence)
    return [
        {"role": "system", "content":
            "Answer the question using ONLY the beliefs and messages below, retrieved from this chat's "
            "memory across its topics. Cite every claim with its tag, like [B12] or [M40]. If they do not "
            "contain the answer, say that the memory does not hold it. Be brief. "
            f"{language.answer_in(lang)}"},
        {"role": "user", "content":
            f"Beliefs:\n{facts or '(none)'}\nMessages:\n{msgs or '(none)'}\n\nQuestion: {question}"},
    ]
