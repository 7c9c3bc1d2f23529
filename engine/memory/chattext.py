"""Chat text fitted for keyword search: what a message's full-text row holds, and the dates a
text names.

Questions name people and dates ("What did Anna do on 7 May 2023?"); messages say "I" and
"yesterday". So a message is indexed (memory_messages_fts, migration 0014) with its speaker's
name in a column of its own and, in ``search_text``: its text, the names and captions of its
attachments, and every date it names, written out absolutely. Relative expressions resolve
against the message's own time: "yesterday I ran a marathon" sent on 8 May 2023 is also
indexed under "7 May 2023".

Dates are written in one form: "7 May 2023" for a day, "May 2023" for a month (a week or a
month), "2023" for a year. ``textutil.fts_query`` rewrites the dates a question names into the
same form and asks for them as phrases; an FTS5 phrase matches a run of tokens, so the
question's "May 2023" also finds an indexed "7 May 2023".

Resolution is a focused regular expression over the expressions people type plus calendar
arithmetic (dateutil's relativedelta): a message costs tens of microseconds, where a general
date parser (dateparser's search_dates) costs milliseconds (bench/RESULTS.md). Ambiguous
expressions resolve the way chat mostly means them: a bare weekday ("on Monday") is the last
one before the message, "last Friday" likewise, "this Friday" the one of the message's week.
"""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Iterable
from zoneinfo import ZoneInfo

from dateutil.relativedelta import relativedelta

from engine.db import Database
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
    """Every date expression in ``text``: its span and the absolute forms it resolves to,
    relative ones against ``at`` (the message's time, or now for a question)."""
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


def dates_in(text: str, at: datetime | date) -> list[str]:
    """The absolute forms of every date ``text`` names, in order, without repeats."""
    return list(dict.fromkeys(f for _, forms in find_dates(text, at) for f in forms))


def searchable_text(text: str, ts: datetime, attachments: Iterable[str] = (), zone: str = "UTC") -> str:
    """What the full-text index holds for a message besides its speaker's name (a column of its
    own, which is what a third-person question about "I" finds): its text, its attachments' names
    and captions, and the absolute dates they name, resolved against the message's time ``ts``
    as a clock in time zone ``zone`` reads it (a naive ``ts`` is taken as already local)."""
    parts = [text.strip()]
    parts += [a.strip() for a in attachments if a and a.strip()]
    dates = dates_in(" ".join(parts), ts.astimezone(ZoneInfo(zone)) if ts.tzinfo else ts)
    if dates:
        parts.append(" · ".join(dates))
    return "\n".join(parts)


async def fit_stored(db: Database, zone: str = "UTC") -> int:
    """Add the dates they name to the messages stored before migration 0014 (listed in
    memory_messages_unfitted), a chunk per transaction, resolving off the event loop; returns how
    many were looked at. Idempotent and resumable: a chunk leaves the list when it is done."""
    seen = 0
    while True:
        rows = await db.fetchall(
            "SELECT u.id, m.text, m.ts FROM memory_messages_unfitted u LEFT JOIN memory_messages m ON m.id = u.id "
            "ORDER BY u.id LIMIT ?", (FIT_CHUNK,))
        if not rows:
            return seen
        stored = [r for r in rows if r["text"] is not None]  # forgotten since: nothing to fit
        fitted = await run_cpu(lambda: [(searchable_text(r["text"], parse_ts(r["ts"]), (), zone), r["id"])
                                        for r in stored])
        changed = [(new, mid) for (new, mid), r in zip(fitted, stored) if new != r["text"]]
        ids = [r["id"] for r in rows]
        async with db.transaction() as conn:
            await conn.executemany("UPDATE memory_messages SET search_text=? WHERE id=?", changed)
            await conn.execute(f"DELETE FROM memory_messages_unfitted WHERE id IN ({','.join('?' * len(ids))})", ids)
        seen += len(rows)
