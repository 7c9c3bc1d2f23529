"""The command parser takes any line, fuzzed: every command of the app, with hostile words (control
characters, NUL, right-to-left marks, 100 kB), options twice, unknown options, options without a
value and unbalanced quotes, on the console (where a leading word may name a local file) and on
Telegram. It returns the arguments or refuses with one line (UsageError) that shows at most a
short piece of what was typed; nothing else ever escapes it."""
from __future__ import annotations

import pytest
from hypothesis import example, given, strategies as st

from bot.commands.registry import UsageError, parse_text_args
from tests.helpers.fuzz import command_lines, full_registry, fuzz

LONGEST_REFUSAL = 600  # a usage line and a short quote of the input; never the input itself


def parse(line: str, console: bool) -> dict:
    name, _, rest = line.strip().lstrip("/").partition(" ")
    command = full_registry().get(name.split("@", 1)[0])
    if command is None:
        return {}
    return parse_text_args(command, rest, [], files_from_text=console,
                           attach_hint="give the file's path" if console else "")


@fuzz(150)
@given(line=command_lines(), console=st.booleans())
@example(line="/simulate " + "x" * 5000 + ".txt what next", console=True)   # a name too long for the system
@example(line="/simulate /tmp/" + "a" * 300 + "/b.pdf what next", console=True)
@example(line="/simulate ~nobody/notes.txt what next", console=True)      # a home folder that does not exist
@example(line="/simulate a\x00b.txt what next", console=True)
@example(line="/recall x --sim " + "s" * 100_000, console=False)
@example(line="/simulate notes.txt what --rounds " + "9" * 5000, console=False)
def test_any_line_gives_arguments_or_one_short_line(line, console):
    try:
        args = parse(line, console)
    except UsageError as refusal:
        text = str(refusal)
        assert "\n" not in text and "\r" not in text, text[:300]
        assert 0 < len(text) <= LONGEST_REFUSAL, f"{len(text)} characters: {text[:300]}…"
        return
    assert isinstance(args, dict)


@pytest.mark.parametrize("line, expected", [
    ("/simulate notes.txt what next --rounds 3 --rounds 4", "--rounds given twice"),
    ("/interview abc agent1 why --platform reddit --platform twitter", "--platform given twice"),
    ("/sim fork abc --from_round 2 --from-round 3", "--from-round given twice"),
    ("/recall anything --sim", "--sim needs a value"),
    ("/recall anything --since 3", "unknown option --since; /recall takes --sim"),
])
def test_options_twice_without_a_value_or_unknown_are_refused_by_name(line, expected):
    with pytest.raises(UsageError) as refusal:
        parse(line, console=False)
    assert str(refusal.value).startswith(expected), str(refusal.value)
