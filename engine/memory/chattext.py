"""Chat text fitted for keyword search: what a message's full-text row holds, and the dates a
text names.

Questions name people and dates ("What did Anna do on 7 May 2023?"); messages say "I" and
"yesterday". So a message is indexed (``fit``; migration 0026) by its speaker's name, and by
its ``search_text``: its text, the names and captions of its attachments, and every date it
names, written out absolutely. Relative expressions resolve against the message's own time:
"yesterday I ran a marathon" sent on 8 May 2023 is also indexed under "7 May 2023". What the
index holds are the tokens of all that (``search_terms``, engine.memory.terms): the name and
text in the language detected in the text, the dates in English, as questions ask for them.
Dates named in other languages ("ontem", "semana passada") are rewritten into English first
(``in_english``, from dateparser's locale data) and resolved alike.

Dates are written in one form: "7 May 2023" for a day, "May 2023" for a month (a week or a
month), "2023" for a year. ``textutil.fts_query`` rewrites the dates a question names into the
same form and asks for them as phrases; a phrase matches a run of tokens, so the question's
"May 2023" also finds an indexed "7 May 2023".

Resolution is a focused regular expression over the expressions people type plus calendar
arithmetic (dateutil's relativedelta): a message costs tens of microseconds, where a general
date parser (dateparser's search_dates) costs milliseconds (bench/RESULTS.md). Ambiguous
expressions resolve the way chat mostly means them: a bare weekday ("on Monday") is the last
one before the message, "last Friday" likewise, "this Friday" the one of the message's week.
"""
from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Iterable
from zoneinfo import ZoneInfo

from dateutil.relativedelta import relativedelta

from engine.db import Database
from engine.memory import beliefs as belief_store, records, terms
from engine.memory.models import parse_ts
from engine.offload import run_cpu

FIT_CHUNK = 500

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_OF = {m: i + 1 for i, m in enumerate(MONTHS)}
_MONTH_OF.update({m[:3]: i + 1 for i, m in enumerate(MONTHS)})
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "a couple": 2}

_MONTH_RE = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
            r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_WEEKDAY_RE = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT_RE = r"(?:\d{1,3}|a\s+couple(?:\s+of)?|couple\s+of|an?|one|two|three|four|five|six|seven|eight|nine|ten|" \
            r"eleven|twelve)"
_UNIT_RE = r"(?:days?|weeks?|months?|years?)"
_ORD = r"(?:st|nd|rd|th)?"

DATES = re.compile(rf"""\b(?:
    (?P<iso_y>\d{{4}})-(?P<iso_m>\d{{1,2}})-(?P<iso_d>\d{{1,2}})(?!\d)
  | (?P<dm_d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<dm_m>{_MONTH_RE})\.?(?:,?\s+(?P<dm_y>\d{{4}}))?
  | (?P<md_m>{_MONTH_RE})\.?\s+(?P<md_d>\d{{1,2}}){_ORD}(?!\d)(?:,?\s+(?P<md_y>\d{{4}}))?
  | (?P<my_m>{_MONTH_RE})\.?,?\s+(?P<my_y>\d{{4}})
  | (?P<before_yesterday>the\s+day\s+before\s+yesterday)
  | (?P<after_tomorrow>the\s+day\s+after\s+tomorrow)
  | (?P<yesterday>yesterday|last\s+night)
  | (?P<today>today|tonight|this\s+(?:morning|afternoon|evening))
  | (?P<tomorrow>tomorrow)
  | (?P<rel>last|past|previous|this|next|coming)\s+(?P<rel_unit>weekend|week|month|year|{_WEEKDAY_RE})
  | (?P<ago_n>{_COUNT_RE})\s+(?P<ago_unit>{_UNIT_RE})\s+(?P<ago_dir>ago|from\s+now)
  | in\s+(?P<in_n>{_COUNT_RE})\s+(?P<in_unit>{_UNIT_RE})
  | (?:on\s+)?(?P<weekday>{_WEEKDAY_RE})
)\b""", re.IGNORECASE | re.VERBOSE)


def day_form(d: date) -> str:
    return f"{d.day} {MONTHS[d.month - 1].capitalize()} {d.year}"


def month_form(d: date) -> str:
    return f"{MONTHS[d.month - 1].capitalize()} {d.year}"


def _count(text: str) -> int:
    word = " ".join(text.lower().replace(" of", "").split())
    return int(word) if word.isdigit() else _NUMBER[word]


def _nearest_year(month: int, day: int, today: date) -> date | None:
    """A day named without its year: the one nearest to ``today``."""
    found = []
    for year in (today.year - 1, today.year, today.year + 1):
        try:
            found.append(date(year, month, day))
        except ValueError:
            continue
    return min(found, key=lambda d: abs((d - today).days)) if found else None


def _day(year: str | None, month: int, day: str, today: date) -> list[str]:
    try:
        return [day_form(date(int(year), month, int(day)))] if year else \
            [day_form(d) for d in [_nearest_year(month, int(day), today)] if d]
    except ValueError:  # 31 February
        return []


def _weekday_before(today: date, weekday: int) -> date:
    return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)


def _relative(rel: str, unit: str, today: date) -> list[str]:
    step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[rel]
    if unit in WEEKDAYS:
        wd = WEEKDAYS.index(unit)
        if step < 0:
            return [day_form(_weekday_before(today, wd))]
        this = today + timedelta(days=wd - today.weekday())
        return [day_form(this + timedelta(weeks=step))]
    if unit == "weekend":
        if step < 0:  # the weekend before this one ("last weekend" said on a Sunday: a week ago)
            saturday = _weekday_before(today, 5) - timedelta(weeks=today.weekday() == 6)
        else:
            saturday = today + timedelta(days=5 - today.weekday(), weeks=step)
        return [day_form(saturday), day_form(saturday + timedelta(days=1))]
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return list(dict.fromkeys([month_form(monday), month_form(monday + timedelta(days=6))]))
    if unit == "month":
        return [month_form(today + relativedelta(months=step))]
    return [str(today.year + step)]


def _shifted(n: int, unit: str, sign: int, today: date) -> list[str]:
    unit = unit.lower().rstrip("s")
    if unit == "year":
        return [str(today.year + sign * n)]
    if unit == "month":
        return [month_form(today + relativedelta(months=sign * n))]
    return [day_form(today + timedelta(days=sign * n * (7 if unit == "week" else 1)))]


def _resolve(m: re.Match, today: date) -> list[str]:
    g = m.groupdict()
    if g["iso_y"]:
        try:
            return [day_form(date(int(g["iso_y"]), int(g["iso_m"]), int(g["iso_d"])))]
        except ValueError:
            return []
    if g["dm_m"]:
        return _day(g["dm_y"], _MONTH_OF[g["dm_m"].lower()[:3]], g["dm_d"], today)
    if g["md_m"]:
        return _day(g["md_y"], _MONTH_OF[g["md_m"].lower()[:3]], g["md_d"], today)
    if g["my_m"]:
        return [month_form(date(int(g["my_y"]), _MONTH_OF[g["my_m"].lower()[:3]], 1))]
    for name, shift in (("before_yesterday", -2), ("after_tomorrow", 2), ("yesterday", -1), ("today", 0),
                        ("tomorrow", 1)):
        if g[name]:
            return [day_form(today + timedelta(days=shift))]
    if g["rel"]:
        return _relative(g["rel"].lower(), g["rel_unit"].lower(), today)
    if g["ago_n"]:
        return _shifted(_count(g["ago_n"]), g["ago_unit"], -1 if g["ago_dir"].lower() == "ago" else 1, today)
    if g["in_n"]:
        return _shifted(_count(g["in_n"]), g["in_unit"], 1, today)
    return [day_form(_weekday_before(today, WEEKDAYS.index(g["weekday"].lower())))]


def find_dates(text: str, at: datetime | date) -> list[tuple[tuple[int, int], list[str]]]:
    """Every date expression in ``text`` (English; ``in_english`` translates others first): its
    span and the absolute forms it resolves to, relative ones against ``at`` (the message's time,
    or now for a question)."""
    today = at.date() if isinstance(at, datetime) else at
    found = []
    for m in DATES.finditer(text):
        try:
            forms = _resolve(m, today)
        except (ValueError, OverflowError):  # beyond the calendar ("9999 years ago")
            continue
        if forms:
            found.append((m.span(), forms))
    return found


def dates_in(text: str, at: datetime | date, lang: str = "en") -> list[str]:
    """The absolute forms of every date ``text`` (in language ``lang``) names, in order, without repeats."""
    return list(dict.fromkeys(f for _, forms in find_dates(in_english(text, lang), at) for f in forms))


# -- dates named in other languages --------------------------------------------------------
# dateparser's locale data (inside the package, 200 locales) names each language's date words:
# months, weekdays, "yesterday" and "last week" ("ontem", "semana passada", "เมื่อวาน"), "3 days
# ago" ("há 3 dias"). They are rewritten into the English expressions above, so one resolver
# serves every language at the same cost (a regular expression per language, compiled once).
# Only the locale's data modules are read, not dateparser's parser.
_RELATIVE = {"0 day ago": "today", "1 day ago": "yesterday", "2 day ago": "the day before yesterday",
             "in 1 day": "tomorrow", "in 2 day": "the day after tomorrow"}
for _unit in ("week", "month", "year"):
    _RELATIVE.update({f"0 {_unit} ago": f"this {_unit}", f"1 {_unit} ago": f"last {_unit}",
                      f"in 1 {_unit}": f"next {_unit}"})
_COUNTED = re.compile(r"^(in )?\\1 (day|week|month|year)( ago)?$")
_WHOLE = re.compile(r"(?<![\d.,])\d+(?![\d.,]*\d)")   # a count, not "2.5"
_UNSPACED = {"th", "zh", "ja", "ko", "my", "km", "lo"}     # languages written without spaces between words


@dataclass(frozen=True)
class _Translator:
    phrases: re.Pattern | None        # fixed phrases and weekdays
    english: dict[str, str]           # their English, by lower-case phrase
    counted: re.Pattern | None        # "há 3 dias" -> "3 days ago": one alternative per template
    templates: dict[str, str]         # by the alternative's group name
    day_month: re.Pattern | None      # "5 de maio de 2023" -> "5 May 2023"
    month_year: re.Pattern | None     # "maio de 2023" -> "May 2023"
    months: dict[str, str]


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


@functools.lru_cache(maxsize=None)
def _translator(lang: str) -> _Translator | None:
    if lang == "en" or not re.fullmatch(r"[a-z]{2,3}", lang or ""):
        return None
    try:
        info = importlib.import_module(f"dateparser.data.date_translation_data.{lang}").info
    except ImportError:
        return None
    edge, end = ("", "") if lang in _UNSPACED else (r"(?<!\w)", r"(?!\w)")
    english: dict[str, str] = {}
    for key, phrases in (info.get("relative-type") or {}).items():
        if key in _RELATIVE:
            english.update({p.lower(): _RELATIVE[key] for p in phrases if p.strip()})
    for day in WEEKDAYS:   # full names only: abbreviations are often words too
        english.update({p.lower(): day for p in info.get(day, []) if len(p) >= 4})
    alternatives: list[str] = []
    templates: dict[str, str] = {}
    for key, patterns in (info.get("relative-type-regex") or {}).items():
        m = _COUNTED.match(key)
        if m:
            unit = m.group(2)
            for p in patterns:
                name = f"c{len(templates)}"
                templates[name] = f"in {{}} {unit}s" if m.group(1) else f"{{}} {unit}s ago"
                alternatives.append(f"(?P<{name}>{p})")
    counted = re.compile(edge + "(?:" + "|".join(alternatives) + ")" + end, re.IGNORECASE) if alternatives else None
    months = {p.lower(): name for name in MONTHS for p in info.get(name, []) if p.strip()}
    skip = [w for w in info.get("skip", []) + info.get("pertain", []) if w.strip() and w.strip().isalpha()]
    sep = rf"\s*(?:(?:{_alternation(skip)})\s+)?" if skip else r"\s*"
    month_re = _alternation(months)
    day_month = re.compile(rf"{edge}(\d{{1,2}})\.?{sep}({month_re})\.?(?:,?{sep}(\d{{4}}))?{end}",
                           re.IGNORECASE) if months else None
    month_year = re.compile(rf"{edge}({month_re})\.?,?{sep}(\d{{4}}){end}", re.IGNORECASE) if months else None
    phrases = re.compile(edge + "(" + _alternation(english) + ")" + end, re.IGNORECASE) if english else None
    return _Translator(phrases, english, counted, templates, day_month, month_year, months)


def in_english(text: str, lang: str) -> str:
    """``text`` with the date expressions of language ``lang`` rewritten in English (the text
    itself when the language is English or unknown to dateparser)."""
    tr = _translator(lang)
    if tr is None:
        return text
    if tr.counted is not None:
        text = tr.counted.sub(lambda m: f" {tr.templates[m.lastgroup or ''].format(int(n.group()))} "
                              if (n := _WHOLE.search(m.group())) else m.group(), text)
    if tr.day_month is not None and tr.month_year is not None:   # both come with the months
        text = tr.day_month.sub(lambda m: " " + " ".join(
            x for x in (m.group(1), tr.months[m.group(2).lower()].capitalize(), m.group(3)) if x) + " ", text)
        text = tr.month_year.sub(lambda m: f" {tr.months[m.group(1).lower()].capitalize()} {m.group(2)} ", text)
    if tr.phrases is not None:
        text = tr.phrases.sub(lambda m: f" {tr.english[m.group().lower()]} ", text)
    return text


@dataclass(frozen=True)
class Searchable:
    """What the full-text index holds for one message."""
    text: str      # search_text: its text, attachments' names and captions, the dates they name
    terms: str     # search_terms: the speaker's name, that text and those dates as tokens (engine.memory.terms)
    lang: str      # the language detected in its text


def fit(author: str, text: str, ts: datetime, attachments: Iterable[str] = (), zone: str = "UTC") -> Searchable:
    """A message as the index holds it: ``searchable_text``, and its tokens (the name and text
    stemmed in the text's language, the resolved dates in English, as questions ask for them)."""
    lang = terms.detect_language(text)
    body, dates = _parts(text, ts, attachments, zone, lang)
    tokens = terms.index_terms(author, lang) + terms.index_terms(body, lang) + terms.index_terms(dates, "en")
    return Searchable("\n".join(x for x in (body, dates) if x), " ".join(tokens), lang)


def _parts(text: str, ts: datetime, attachments: Iterable[str], zone: str, lang: str) -> tuple[str, str]:
    parts = [text.strip()]
    parts += [a.strip() for a in attachments if a and a.strip()]
    body = "\n".join(parts)
    dates = dates_in(" ".join(parts), ts.astimezone(ZoneInfo(zone)) if ts.tzinfo else ts, lang)
    return body, " · ".join(dates)


def searchable_text(text: str, ts: datetime, attachments: Iterable[str] = (), zone: str = "UTC",
                    lang: str = "en") -> str:
    """What the full-text index holds for a message besides its speaker's name (a column of its
    own, which is what a third-person question about "I" finds): its text, its attachments' names
    and captions, and the absolute dates they name (in language ``lang``), resolved against the
    message's time ``ts`` as a clock in time zone ``zone`` reads it (a naive ``ts`` is taken as
    already local)."""
    return "\n".join(x for x in _parts(text, ts, attachments, zone, lang) if x)


async def fit_stored(db: Database, zone: str = "UTC") -> int:
    """Compute the search text and tokens of the messages (and beliefs) stored before this
    version indexed them (listed in memory_messages_unfitted and beliefs_unfitted), a chunk per
    transaction, off the event loop; returns how many rows were looked at. Idempotent and
    resumable: a chunk leaves its list when it is done. A stored message's attachments are
    not kept, so its refitted text is its own."""
    seen = 0
    while True:
        rows = await db.fetchall(
            "SELECT u.id, m.author, m.text, m.ts FROM memory_messages_unfitted u "
            "LEFT JOIN memory_messages m ON m.id = u.id ORDER BY u.id LIMIT ?", (FIT_CHUNK,))
        if not rows:
            break
        stored = [r for r in rows if r["text"] is not None]  # forgotten since: nothing to fit
        fitted = await run_cpu(lambda: [fit(r["author"], r["text"], parse_ts(r["ts"]), (), zone)
                                        for r in stored])  # noqa: B023 (awaited within this iteration)
        ids = [r["id"] for r in rows]
        async with db.transaction() as conn:
            await records.set_search_texts(conn, [(f.text, f.terms, r["id"]) for f, r in zip(fitted, stored)])
            await conn.execute(f"DELETE FROM memory_messages_unfitted WHERE id IN ({','.join('?' * len(ids))})", ids)
        seen += len(rows)
    while True:
        rows = await db.fetchall(
            "SELECT u.id, b.subject, b.predicate, b.object FROM beliefs_unfitted u "
            "LEFT JOIN beliefs b ON b.id = u.id ORDER BY u.id LIMIT ?", (FIT_CHUNK,))
        if not rows:
            return seen
        stored = [r for r in rows if r["subject"] is not None]
        terms = await run_cpu(lambda: [belief_store.belief_terms(r["subject"], r["predicate"], r["object"])
                                       for r in stored])  # noqa: B023 (awaited within this iteration)
        ids = [r["id"] for r in rows]
        async with db.transaction() as conn:
            await belief_store.set_search_terms(conn, [(t, r["id"]) for t, r in zip(terms, stored)])
            await conn.execute(f"DELETE FROM beliefs_unfitted WHERE id IN ({','.join('?' * len(ids))})", ids)
        seen += len(rows)
