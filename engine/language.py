"""Languages: their codes, and their names, the English ones prompts use and the ones people read.

The one home of what a language code means and what a language is called; the bot's own words
(engine.i18n) pick their catalog from the code this module reads.

Every prompt whose answer people read (an /ask answer, a catch-up, a belief, a world's name, an
ontology's descriptions, personas, agents' posts, interviews, a report) names the language it
wants by its English name, explicitly ("Answer in Brazilian Portuguese."): a model told nothing
drifts into whatever language the instructions or the evidence are in. Which language that is
is decided where the text is asked for (engine.memory.languages for memory, the simulation's
spec for simulations); what a text is written in is read by engine.memory.terms, the one
detector.

Codes are BCP 47 as people write them: ``en``, ``th``, ``pt-BR``. Names come from the Unicode
CLDR through Babel (659 languages, nothing downloaded), so any language the detector knows and
CLDR names can be asked for. Portuguese without a country is Brazilian Portuguese: the detector
cannot tell Brazil's from Portugal's, and the communities this bot was built for are Brazilian
(``pt-PT`` asks for European Portuguese). A name people read is in the language the bot writes
to them in (``shown``, ``describe``: "português (Brasil)"); ``name(code, code)`` is what a
language calls itself ("ไทย"), how /settings offers the catalogs' languages.

An answer the LLM writes in another language than asked (``other_than``) is asked again with
the correction; one still in another language after that is kept, not thrown away: a useful answer
in the wrong language beats none (engine.llm.client, ``chat(language=...)`` and
``ContentChecks.language``).

Importing this module loads nothing heavy: the simulation's run child uses it too.
"""
from __future__ import annotations

import functools

DEFAULT = "en"
# A bare language code that stands for one of its countries' (see the module's docstring).
BARE = {"pt": "pt-BR"}


@functools.lru_cache(maxsize=8)
def _names(reader: str = DEFAULT) -> dict[str, str]:
    """Language names as ``reader`` (a Babel locale identifier: 'en', 'pt_BR') writes them."""
    from babel import Locale
    return dict(Locale.parse(reader).languages)


@functools.lru_cache(maxsize=512)
def normalize(code: str | None) -> str | None:
    """A language code as people and platforms write it ('pt', 'pt_br', 'TH', 'zh-Hant') in its
    canonical form ('pt-BR', 'th', 'zh-Hant'); None when it is empty, malformed or names no
    language CLDR knows."""
    from babel import Locale, UnknownLocaleError
    if not code or not code.strip():
        return None
    code = code.strip().replace("_", "-")
    try:
        locale = Locale.parse(code, sep="-")
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    if locale.language not in _names():
        return None
    parts = [locale.language, locale.script, locale.territory]
    canonical = "-".join(p for p in parts if p)
    return BARE.get(canonical, canonical)


def name(code: str | None, reader: str = DEFAULT) -> str | None:
    """The name of the language ``code`` as the language ``reader`` writes it: in English by
    default ('pt' and 'pt-BR': 'Brazilian Portuguese', 'th': 'Thai'), in Portuguese with
    ``reader='pt-BR'`` ('português (Brasil)'); None when ``code`` names no language."""
    canonical = normalize(code)
    if canonical is None:
        return None
    from babel import Locale
    reader = (normalize(reader) or DEFAULT).replace("-", "_")
    names = _names(reader)
    key = canonical.replace("-", "_")
    if key in names:
        return names[key]
    return Locale.parse(key).get_display_name(reader)


def base(code: str | None) -> str | None:
    """The language of ``code`` without its script or country ('pt-BR': 'pt'); None when it names none."""
    canonical = normalize(code)
    return canonical.split("-")[0] if canonical else None


def other_than(text: str, code: str) -> str | None:
    """The language ``text`` is surely written in when that is not ``code`` (a country aside:
    Portuguese text is in ``pt-BR``), as an ISO 639-1 code; None when it is in ``code``, when
    ``code`` stands among its likely languages (Portuguese read as Galician), or when it is too
    short or unclear to tell. Blocking: the detector (engine.memory.terms) loads on first use."""
    from engine.memory import terms
    scores = terms.language_scores(text, 3)
    want = base(code)
    if not scores or scores[0][1] < terms.SURE or want is None:
        return None
    if any(lang == want and score >= terms.CANDIDATES for lang, score in scores):
        return None
    return scores[0][0]


def known(code: str | None) -> bool:
    return name(code) is not None


def named(code: str | None) -> str:
    """The name a prompt asks for ``code`` by: its English name, English when it names no language."""
    return name(code) or name(DEFAULT) or "English"


def answer_in(code: str | None) -> str:
    """The sentence a prompt ends with: "Answer in Brazilian Portuguese."."""
    return f"Answer in {named(code)}."


def shown(code: str | None) -> str:
    """How a language is named to people: in the language the bot writes to them in now
    (engine.i18n): "Brazilian Portuguese" in English, "português (Brasil)" in Portuguese."""
    from engine import i18n
    return name(code, i18n.current()) or name(DEFAULT, i18n.current()) or "English"


def describe(code: str | None) -> str:
    """A language named to people with its code: "Brazilian Portuguese (pt-BR)"."""
    canonical = normalize(code) or DEFAULT
    return f"{shown(canonical)} ({canonical})"
