"""SQL is written once with SQLite's ``?`` placeholders; PostgreSQL (asyncpg) wants ``$1, $2, ...``.

The rewrite skips quoted strings, quoted identifiers and comments, so a literal '?' stays a
literal. Statements are mostly constant strings, so the result is cached by text.
"""
from __future__ import annotations

import re
from functools import lru_cache

_TOKENS = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|\?""", re.S)


@lru_cache(maxsize=4096)
def numbered(sql: str) -> str:
    count = 0

    def swap(m: re.Match) -> str:
        nonlocal count
        if m.group(0) != "?":
            return m.group(0)
        count += 1
        return f"${count}"

    return _TOKENS.sub(swap, sql)
