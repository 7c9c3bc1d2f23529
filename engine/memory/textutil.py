"""Words, stop words and full-text queries shared by routing, topics and recall."""
from __future__ import annotations

import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)

# Chat filler that carries no topic beyond English stop words.
CHAT_FILLER = frozenset({
    "ok", "okay", "yes", "yeah", "yep", "nope", "lol", "haha", "hahaha", "hehe", "lmao", "thanks",
    "thx", "ty", "sure", "cool", "nice", "great", "right", "hmm", "hm", "oh", "ah", "wow", "k",
    "ya", "yup", "agreed", "true", "really", "think", "guess", "maybe", "good", "like", "just",
    "know", "dont", "don", "im", "gonna", "got", "get",
})
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) | CHAT_FILLER


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if len(w) > 1 and w not in STOP_WORDS]


def fts_query(text: str, limit: int = 12) -> str | None:
    """An FTS5 MATCH expression: any of the text's content words, each quoted."""
    terms = list(dict.fromkeys(content_words(text)))[:limit]
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
