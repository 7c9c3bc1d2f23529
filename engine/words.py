"""Words that agree with their numbers: "1 message", "2 messages", "0 rounds".

Every count shown to a user goes through ``plural`` so no message says "1 messages".
"""
from __future__ import annotations


def plural(n: int | float, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in agreement; ``many`` is the plural when it is not ``word + "s"``
    (``plural(2, "reply", "replies")``). Large whole numbers get thousands separators."""
    shown = f"{n:,}" if isinstance(n, int) else f"{n:g}"
    return f"{shown} {word if n == 1 else (many or word + 's')}"
