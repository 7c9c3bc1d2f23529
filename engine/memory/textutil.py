"""Words, stop words and full-text queries shared by routing, topics and recall."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from engine.memory import terms
from engine.memory.chattext import find_dates, in_english
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
# The same in the languages of the communities the bot was first built for (greetings, laughter).
OTHER_CHAT_FILLER = {
    "pt": {"oi", "ola", "olá", "pessoal", "galera", "gente", "kkk", "kkkk", "kkkkk", "rs", "rsrs", "tipo", "ne", "né",
           "sim", "beleza", "valeu", "tá", "ta", "vc", "vcs", "pra", "pro", "tô", "to", "aí", "ai", "alguém"},
    "es": {"hola", "jaja", "jajaja", "vale", "gente", "chicos", "bueno", "pues", "sí", "si"},
    "th": {"ครับ", "ค่ะ", "คะ", "นะ", "จ้า", "555", "5555"},
}
# How questions are asked, not what about: left out of full-text queries.
QUESTION_WORDS = frozenset({"did", "does", "doing", "tell", "say", "said", "kind", "remember", "recall"})

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


@functools.lru_cache(maxsize=None)
def stop_words(lang: str) -> frozenset[str]:
    """The stop words of language ``lang`` (ISO 639-1), chat filler included: English's list above,
    Thai's from PyThaiNLP, others from stopwordsiso (the stopwords-iso collection, MIT, 57
    languages, inside the package)."""
    if lang == "en":
        return STOP_WORDS
    if lang == "th":   # PyThaiNLP's list (1,030 words; stopwords-iso has 116)
        from pythainlp.corpus import thai_stopwords
        return frozenset(thai_stopwords()) | OTHER_CHAT_FILLER["th"]
    import stopwordsiso
    found = stopwordsiso.stopwords(lang) if stopwordsiso.has_lang(lang) else set()
    return frozenset(w.lower() for w in found) | OTHER_CHAT_FILLER.get(lang, set())


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    """The words of ``text`` that say what it is about, in its own language: cut into words where
    its script has no spaces (Thai, Chinese, Japanese: engine.memory.terms), the stop words and
    chat filler of its language and of English left out, one-letter words of cased scripts too."""
    stop = STOP_WORDS | stop_words(terms.detect_language(text))
    return [w for w, cased in terms.segments(text) if w not in stop and (len(w) > 1 or not cased)]


@dataclass(frozen=True)
class Query:
    """A question as keyword search asks it: index tokens and phrases of tokens (a date), any of
    which may match (OR: BM25 ranks by how many match and how rare they are). Rendered in each
    database's syntax by engine.memory.keyword_sql."""
    alternatives: tuple[tuple[str, ...], ...]


def fts_query(text: str, limit: int = 12, now: datetime | None = None) -> Query | None:
    """The keyword query for a question, for the message and belief indexes alike: the absolute
    dates it names (in its own language or English), written as chattext indexes them and asked
    as phrases (relative ones like "yesterday" or "ontem" resolve against ``now``, the current
    time by default), then its content words (stop words of its languages left out; Thai and
    Chinese segmented), each under its stem in every language the question plausibly is
    (engine.memory.terms.question_languages), an English irregular verb with its other forms
    (buy -> bought). At most ``limit`` words and dates (a word's forms count once); None when
    nothing is left to search for."""
    langs = terms.question_languages(text)
    text = in_english(text, langs[0])
    found = find_dates(text, now or datetime.now(timezone.utc))
    groups: list[tuple[tuple[str, ...], ...]] = [(tuple(terms.index_terms(form, "en")),)
                                                 for _, forms in found for form in forms]
    for (start, end), _ in reversed(found):
        text = text[:start] + " " + text[end:]
    stop = STOP_WORDS.union(*(stop_words(lang) for lang in langs)) | QUESTION_WORDS
    for word, stems in terms.segments(text):
        if word in stop or (stems and len(word) < 2):
            continue
        if stems:
            groups.append(tuple((form,) for w in VERB_FORMS.get(word, (word,)) for form in terms.word_forms(w, langs)))
        else:
            groups.append(((word,),))
    groups = list(dict.fromkeys(groups))[:limit]
    alternatives = tuple(dict.fromkeys(a for group in groups for a in group))
    return Query(alternatives) if alternatives else None
