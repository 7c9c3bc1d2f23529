"""Words, stop words and full-text queries shared by routing, topics and recall."""
from __future__ import annotations

import re
from datetime import datetime, timezone

from engine.memory.chattext import find_dates
from engine.memory.stopwords import ENGLISH_STOP_WORDS

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

# Irregular verbs, as a question asks them ("What did Anna buy?") and a message tells them ("I bought
# a bike"): the porter stemmer joins buy/buys/buying, never buy/bought. Words that are mostly nouns
# in chat (saw, rose, bear, lead, ground, wound, lay...) are left out.
_IRREGULAR = (
    "arise arose arisen; awake awoke awoken; beat beaten; become became; begin began begun; bend bent; "
    "bite bitten; bleed bled; blow blew blown; break broke broken; breed bred; bring brought; build built; "
    "burn burnt; buy bought; catch caught; choose chose chosen; come came; creep crept; deal dealt; dig dug; "
    "draw drew drawn; dream dreamt; drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; "
    "feed fed; feel felt; fight fought; find found; flee fled; fly flew flown; forget forgot forgotten; "
    "forgive forgave forgiven; freeze froze frozen; get got gotten; give gave given; go went gone; "
    "grow grew grown; hang hung; hear heard; hide hid hidden; hold held; keep kept; know knew known; "
    "learn learnt; leave left; lend lent; lose lost; make made; mean meant; meet met; pay paid; "
    "ride rode ridden; ring rang rung; rise risen; run ran; say said; see seen; seek sought; sell sold; "
    "send sent; shake shook shaken; shine shone; shoot shot; show shown; shrink shrank shrunk; sing sang sung; "
    "sink sank sunk; sit sat; sleep slept; speak spoke spoken; spend spent; spin spun; stand stood; "
    "steal stole stolen; stick stuck; strike struck; swear swore sworn; sweep swept; swim swam swum; "
    "swing swung; take took taken; teach taught; tear tore torn; tell told; think thought; throw threw thrown; "
    "understand understood; wake woke woken; wear wore worn; win won; write wrote written")
VERB_FORMS = {form: forms for forms in (tuple(group.split()) for group in _IRREGULAR.split("; ")) for form in forms}


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if len(w) > 1 and w not in STOP_WORDS]


def fts_query(text: str, limit: int = 12, now: datetime | None = None) -> str | None:
    """An FTS5 MATCH expression for a question, for the message and belief indexes alike (the same
    text is a websearch_to_tsquery expression on PostgreSQL: engine.memory.keyword_sql): any
    (OR, so bm25 ranks by how many terms match and how rare they are) of the absolute dates it
    names, written as chattext indexes them and asked as phrases (relative ones like "yesterday"
    resolve against ``now``, the current time by default), then its content words, possessives
    cut ("Caroline's" -> caroline, which also finds her messages by their speaker column), an
    irregular verb with its other forms (buy -> bought). At most ``limit`` terms (a verb's forms
    count once); None when nothing is left to search for."""
    found = find_dates(text, now or datetime.now(timezone.utc))
    terms: list[tuple[str, ...]] = [(form,) for _, forms in found for form in forms]
    for (start, end), _ in reversed(found):
        text = text[:start] + " " + text[end:]
    for word in words(text):
        word = _POSSESSIVE.sub("", word)
        if len(word) > 1 and word not in STOP_WORDS and word not in QUESTION_WORDS:
            terms.append(VERB_FORMS.get(word, (word,)))
    terms = list(dict.fromkeys(terms))[:limit]
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for group in terms for t in group)
