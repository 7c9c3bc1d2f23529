"""Words, stop words and full-text queries shared by routing, topics and recall."""
from __future__ import annotations

import re
from datetime import datetime, timezone

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from engine.memory.chattext import find_dates

_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)

# Chat filler that carries no topic beyond English stop words.
CHAT_FILLER = frozenset({
    "ok", "okay", "yes", "yeah", "yep", "nope", "lol", "haha", "hahaha", "hehe", "lmao", "thanks",
    "thx", "ty", "sure", "cool", "nice", "great", "right", "hmm", "hm", "oh", "ah", "wow", "k",
    "ya", "yup", "agreed", "true", "really", "think", "guess", "maybe", "good", "like", "just",
    "know", "dont", "don", "im", "gonna", "got", "get",
})
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | CHAT_FILLER
# How questions are asked, not what about: left out of full-text queries.
QUESTION_WORDS = frozenset({"did", "does", "doing", "tell", "say", "said", "kind", "remember", "recall"})
_POSSESSIVE = re.compile(r"(?:'s|')$")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if len(w) > 1 and w not in STOP_WORDS]


def fts_query(text: str, limit: int = 12, now: datetime | None = None) -> str | None:
    """An FTS5 MATCH expression for a question, for the message and belief indexes alike: any
    (OR, so bm25 ranks by how many terms match and how rare they are) of the absolute dates it
    names, written as chattext indexes them and asked as phrases (relative ones like "yesterday"
    resolve against ``now``, the current time by default), then its content words, possessives
    cut ("Caroline's" -> caroline, which also finds her messages by their speaker column).
    At most ``limit`` terms; None when nothing is left to search for."""
    found = find_dates(text, now or datetime.now(timezone.utc))
    terms = [form for _, forms in found for form in forms]
    for (start, end), _ in reversed(found):
        text = text[:start] + " " + text[end:]
    for word in words(text):
        word = _POSSESSIVE.sub("", word)
        if len(word) > 1 and word not in STOP_WORDS and word not in QUESTION_WORDS:
            terms.append(word)
    terms = list(dict.fromkeys(terms))[:limit]
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
