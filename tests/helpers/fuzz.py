"""Shared by the fuzz tests (hypothesis): their settings, the hostile text they type, and what the
database holds, to compare before and after input the bot refused.

``fuzz(examples)`` is the settings every fuzz test takes, on the hypothesis profile named by
``WORLDBOT_FUZZ_PROFILE``: "suite" (the default) runs ``examples`` examples, sized so that all the
fuzz tests together take well under a minute on two loaded cores, derandomized (the same examples
on every run, so CI is reproducible) and with no example database written into the tree;
"explore" draws fresh random examples, ten times as many, for a longer hunt by hand
(``WORLDBOT_FUZZ_PROFILE=explore pytest -n 0 tests/...``; a failure prints the blob that replays it).

``hostile_text`` is text a hostile or careless user sends: any unicode, control characters and NUL,
right-to-left marks and overrides, lone surrogates (JSON may carry them), and now and then 100 kB.
``command_lines`` are console (or Telegram) lines that call the app's real commands with such
words, options given twice, unknown options, options without their value and unbalanced quotes.
``stored_rows`` is every row of every table the bot keeps data in, to assert that refused input
changed nothing; the process's lease and claims, renewed on a timer, are left out.
"""
from __future__ import annotations

import functools
import os

from hypothesis import HealthCheck, settings, strategies as st

CONTROL = "\x00\x01\x07\x08\t\x0b\x0c\r\x1b\x7f\x85\u2028\u2029"
BIDI = "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ODD = "\ufeff\ufffd\u200b\u200d\u0301\ud800\udc00\udfff🙂ß\u0130"
SHELL = "\"'\\`$;|&<>*?~#"

settings.register_profile(
    "suite", derandomize=True, database=None, deadline=None, print_blob=True,
    # the app (and its database) lives across examples on purpose: one long-running process that
    # takes every input in turn; and hostile input is large on purpose
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.large_base_example])
settings.register_profile("explore", settings.get_profile("suite"), derandomize=False)
PROFILE = os.environ.get("WORLDBOT_FUZZ_PROFILE", "suite")
SCALE = {"suite": 1, "explore": 10}[PROFILE]


def fuzz(examples: int) -> settings:
    """The settings of a fuzz test that runs ``examples`` examples in the suite."""
    return settings(settings.get_profile(PROFILE), max_examples=examples * SCALE)


_odd_char = st.sampled_from(CONTROL + BIDI + ODD + SHELL)
_char = st.one_of(st.characters(), _odd_char, _odd_char)


def huge_text() -> st.SearchStrategy[str]:
    """A short hostile piece repeated to 5 or 100 kB."""
    return st.builds(lambda piece, n: piece * (n // len(piece)), st.text(_char, min_size=1, max_size=8),
                     st.sampled_from([5_000, 100_000]))


def hostile_text(max_size: int = 60, huge: bool = True) -> st.SearchStrategy[str]:
    """Text with every kind of character; with ``huge``, one time in eight 5 or 100 kB of it."""
    small = st.text(_char, max_size=max_size)
    if not huge:
        return small
    return st.one_of(*[small] * 7, huge_text())


def hostile_word() -> st.SearchStrategy[str]:
    """One token of a command line: no plain spaces (hostile whitespace stays in)."""
    return hostile_text(12, huge=False).map(lambda s: s.replace(" ", "") or "x")


@functools.cache
def full_registry():
    """The commands of the whole app, as every feature defines them (for drawing their names and
    options; nothing runs): an app on a database in a temporary folder, closed once its features
    have defined them. Built on a thread of its own, as strategies are drawn inside tests' loops."""
    import asyncio
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from bot.app import App
    from engine.config import parse_config

    async def build():
        with tempfile.TemporaryDirectory() as tmp:
            app = await App.create(parse_config({"bot": {"data_dir": tmp}}))
            await app.services.close()
            return app.commands

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, build()).result()


# What people type where a number, a choice or a path belongs, and the quoting that breaks shlex.
ODD_VALUES = ["nan", "inf", "-inf", "-1", "0", "1e309", "9" * 5000, "٣", "0x10", "1_000", "", "''", '""',
              '"', "'", '"unclosed', "'a b", "\\", "--", "-", "~", "~nobody/x.txt", "/", ".", "..", "*.txt",
              "x" * 5000 + ".txt", "/tmp/" + "a" * 300 + "/b.pdf", "a\x00b.txt"]


@st.composite
def command_lines(draw, plain: bool = False) -> str:
    """'/name …': mostly a real command of the app with hostile arguments, sometimes no command;
    with ``plain``, sometimes a plain line instead."""
    if plain and draw(st.integers(0, 3)) == 0:
        return draw(hostile_text())
    registry = full_registry()
    name = draw(st.one_of(st.sampled_from(sorted(registry.commands)), st.sampled_from(sorted(registry.commands)),
                          hostile_word()))
    command = registry.get(name)
    args = command.args if command is not None else []
    options = [f"--{a.name}" for a in args if a.option] + [f"--{a.name.replace('_', '-')}" for a in args if a.option]
    words = [c for a in args for c in a.choices] + ["me", "all", "on", "off", "now", "status", "confirm"]
    token = st.one_of(hostile_word(), hostile_text(huge=False), st.sampled_from(words), st.sampled_from(ODD_VALUES),
                      st.sampled_from(options + ["--bogus", "--sim", "--rounds", "--x=1", "---", "--\u202e"]),
                      st.integers().map(str))
    tokens = draw(st.lists(token, max_size=8))
    if draw(st.integers(0, 7)) == 0:  # one line in eight carries a huge argument
        tokens.insert(draw(st.integers(0, len(tokens))), draw(huge_text()))
    head = draw(st.sampled_from(["/", "/", " /", "/", "//"])) + name + draw(st.sampled_from(["", "", "@world_bot",
                                                                                              "@other"]))
    return head + " " + draw(st.sampled_from([" ", "  ", "\t", " \u00a0 "])).join(tokens)


# Renewed on a timer while the app runs, whatever anyone types.
LIVE_TABLES = {"owners", "claims"}


async def table_names(db) -> list[str]:
    """The bot's tables (full-text indexes aside: they mirror the tables they index)."""
    if db.dialect == "postgresql":
        rows = await db.fetchall("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return sorted(r[0] for r in rows if r[0] not in LIVE_TABLES)
    rows = await db.fetchall("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    fts = [r["name"] for r in rows if (r["sql"] or "").startswith("CREATE VIRTUAL")]
    return sorted(r["name"] for r in rows if not r["name"].startswith("sqlite_") and r["name"] not in LIVE_TABLES
                  and not any(r["name"] == f or r["name"].startswith(f + "_") for f in fts))


async def stored_rows(db) -> dict[str, list[str]]:
    """Every row of every table, as sorted text: equal before and after means nothing changed."""
    return {table: sorted(repr(tuple(row)) for row in await db.fetchall(f'SELECT * FROM "{table}"'))
            for table in await table_names(db)}
