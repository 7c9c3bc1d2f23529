"""The bot's own words in the language of the chat: gettext catalogs read with Babel.

Every string the bot writes to people is an English msgid in the source, translated where it is
written: ``_("unknown command /{name}.", name=name)`` looks the msgid up in the current language
and then fills its ``{placeholders}``; ``plural(n, "{n} message", "{n} messages")``
(engine.words) picks the language's plural form. A definition made once at start-up (a command's
description, an argument's, a table of headings) keeps the English msgid, marked for extraction
by ``N_`` (``Arg("query", N_("what to look for"))``), and is
translated where it is shown, with ``_(text)``; one whose wording needs values computed at
start-up is a callable that returns the translated text (``describe``).

The current language is a context variable: ``App.dispatch`` sets it for each command from the
chat's language (``/settings language``, else the platform's locale, else ``[bot] language``),
the job runner for each job from the language the job was started in (stored with it), the
scheduler for each digest. Anything else (the CLI, logs, prompts to the LLM) stays English; a
prompt that quotes a line people also read (an ensemble's confidence line) takes its English copy
from the same function called under English (``english``), never from a second wording.
``engine.offload.run_cpu`` carries it into worker threads, so charts drawn there are labelled
in it too.

Catalogs: ``engine/locale/<language>/LC_MESSAGES/worldbot.po``, the only source; a language's is
compiled in memory with Babel the first time a process uses it (tens of milliseconds), so no
compiled ``.mo`` can fall out of step with its ``.po``. English is the msgids themselves; pt_BR
and th are complete (tests/engine/test_i18n.py fails on a missing or fuzzy translation, or one
whose placeholders differ from its msgid's).
"""
from __future__ import annotations

import contextlib
import functools
import gettext
import io
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

from engine import language

# The languages a catalog serves, by their catalogs' names (what each calls itself:
# engine.language.name(code, code)).
LANGUAGES = ("en", "pt_BR", "th")
DEFAULT = "en"
DOMAIN = "worldbot"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
# Babel's extraction keywords (``pybabel extract -k``, README "Languages"): the functions whose
# string arguments are msgids, and which arguments. A marker call inside another keyword call is
# lost by Babel's extractor, so definitions mark their own texts with N_, never through a keyword.
KEYWORDS: dict[str, tuple[int, ...] | None] = {"_": None, "N_": None, "plural": (2, 3)}

_language: ContextVar[str] = ContextVar("worldbot_language", default=DEFAULT)
_lock = threading.Lock()


def normalize(code: str | None) -> str | None:
    """A language code as people and platforms write it ('pt-BR', 'pt', 'th_TH', 'en-US') -> the
    catalog that serves it ('pt_BR', 'th', 'en'); None when no catalog does. The code is read by
    engine.language; a country without its own catalog is served by its language's (Portuguese of
    any country by the Brazilian catalog)."""
    canonical = language.normalize(code)
    if canonical is None:
        return None
    exact = canonical.replace("-", "_")
    if exact in LANGUAGES:
        return exact
    base = canonical.split("-")[0]
    return next((catalog for catalog in LANGUAGES if catalog.split("_")[0] == base), None)


def current() -> str:
    """The language answers are written in now."""
    return _language.get()


def set_language(code: str | None) -> None:
    """Write in ``code`` from now on in this task (a job's task for its whole life)."""
    _language.set(normalize(code) or DEFAULT)


@contextlib.contextmanager
def using(code: str | None) -> Iterator[str]:
    """Write in ``code`` inside the block (an unknown or empty code: English)."""
    language = normalize(code) or DEFAULT
    token = _language.set(language)
    try:
        yield language
    finally:
        _language.reset(token)


def english(write: Callable[[], str]) -> str:
    """What ``write`` writes in English, whatever the current language: a prompt's copy of a line
    the reader gets translated (an ensemble's confidence line), made by the same function."""
    with using(DEFAULT):
        return write()


@functools.cache
def _translations(language: str) -> gettext.NullTranslations:
    if language == DEFAULT:
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    with _lock, (LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as fh:
        catalog = read_po(fh, locale=language)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)   # fuzzy entries are left out, as msgfmt does
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def _(msgid: str, **values: object) -> str:
    """``msgid`` in the current language, its ``{placeholders}`` filled from ``values``."""
    if not msgid:
        return msgid   # gettext("") is the catalog's header
    text = _translations(current()).gettext(msgid)
    return text.format(**values) if values else text


def ngettext(one: str, many: str, count: int | float, **values: object) -> str:
    """The form of ``one``/``many`` the current language uses for ``count``, filled from ``values``."""
    whole = count if isinstance(count, int) else (1 if count == 1 else 2)
    text = _translations(current()).ngettext(one, many, whole)
    return text.format(**values) if values else text


def N_(msgid: str) -> str:
    """Mark ``msgid`` for extraction where it is defined; translate it where shown, with ``_``."""
    return msgid


Text = str | Callable[[], str]   # a msgid, or a callable that returns text already translated


def describe(text: Text) -> str:
    """A definition's text (a command's description, a heading) in the current language."""
    return text() if callable(text) else _(text)


def number(n: int | float) -> str:
    """A count as the current language writes it: 12,345 in English and Thai, 12.345 in Portuguese."""
    from babel.numbers import format_decimal
    return format_decimal(n, locale=current(), group_separator=True)


def percent(share: float) -> str:
    """A share (0.4) as the current language writes a whole percentage: "40%"."""
    from babel.numbers import format_percent
    return format_percent(share, locale=current())
