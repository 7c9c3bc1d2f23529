"""Words that agree with their numbers: "1 message", "2 messages", "0 rounds", in the chat's language.

Every count shown to a user goes through ``plural`` so no message says "1 messages": it takes the
English singular and plural, both msgids of the catalog (engine.i18n), and gives the form the
current language uses for ``n`` (Portuguese: one form for 0 and 1; Thai: one form for every n).
"""
from __future__ import annotations

from typing import Iterable

from engine.i18n import _, ngettext, number


def plural(n: int | float, one: str, many: str, **values: object) -> str:
    """``plural(2, "{n} reply", "{n} replies")`` -> "2 replies": the form for ``n`` in the current
    language, with ``{n}`` the number as that language writes it (thousands separated) and other
    placeholders filled from ``values``."""
    shown = number(n) if isinstance(n, int) else f"{n:g}"
    return ngettext(one, many, n, n=shown, **values)


def in_english(n: int, one: str, many: str) -> str:
    """``n`` and its English word in agreement, outside the catalogs: for text that is never
    translated, such as prompts to the LLM (``in_english(3, "{n} agent", "{n} agents")``)."""
    return (one if n == 1 else many).format(n=f"{n:,}")


def joined(names: Iterable[str]) -> str:
    """Names as a phrase in the current language: "twitter", "twitter and reddit", "a, b and c"."""
    names = list(names)
    if len(names) < 2:
        return "".join(names)
    return _("{first} and {second}", first=", ".join(names[:-1]), second=names[-1])
