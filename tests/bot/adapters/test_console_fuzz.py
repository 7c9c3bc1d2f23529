"""Console lines, fuzzed, through the real console adapter and every feature of the app, on both
databases: hostile words, control characters and NUL, right-to-left overrides, 100 kB arguments,
options twice, unknown options, unbalanced quotes, plain lines in a channel whose memory is off.
Each line gets at most one line back (the usage or refusal, never "failed because of an error
inside the bot"), nothing is logged as an error, a refused line changes no stored row, and the
console answers /help after all of them."""
from __future__ import annotations

import logging

import pytest
from hypothesis import example, given

from bot.adapters.console import Console
from bot.public import INSIDE
from tests.helpers.chat import make_app
from tests.helpers.fuzz import command_lines, fuzz, stored_rows

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def console(tmp_path, db_url):
    app = await make_app(tmp_path, db_url)
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    await console.handle_line("/memory off")   # something stored to damage; plain lines stay unstored
    await console.handle_line("/digest on 09:30")
    yield console
    await app.close()


@fuzz(40)
@given(line=command_lines(plain=True))
@example(line="/recall " + "x" * 100_000)
@example(line="/forget message " + "\u202e" * 5000)
@example(line="/memory on --sim a --sim b")
@example(line="/digest on 25:99\x00")
@example(line="/simulate " + "x" * 5000 + ".txt what next")
@example(line="/sim inject abc " + "\ud800" * 50)
@example(line="/\x1b[2J/help")
async def test_every_console_line_gets_at_most_one_line_and_refusals_store_nothing(console, capsys, caplog, line):
    db = console.app.db
    before = await stored_rows(db)
    capsys.readouterr()
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        await console.handle_line(line)
    out = capsys.readouterr().out
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[:2000]
    assert INSIDE not in out, out[:2000]
    if out.startswith("⚠"):   # refused: one line, and nothing stored changed
        assert out.count("\n") == 1, out[:2000]
        assert await stored_rows(db) == before
    elif not line.strip().startswith("/"):   # a plain line where memory is off: ignored
        assert out == ""
        assert await stored_rows(db) == before


async def test_the_console_answers_after_hostile_lines(console, capsys):
    for line in ["/recall " + "\x00" * 100_000, "/help \udcff\udcfe", "/worlds --sim", "/sims --bogus 1"]:
        await console.handle_line(line)
    capsys.readouterr()
    await console.handle_line("/help")
    assert "Commands:" in capsys.readouterr().out
