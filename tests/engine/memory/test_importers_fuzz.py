"""Import files, fuzzed (what `python -m bot import` reads): JSONL with broken lines, fields of the
wrong type, times past the calendar, 100 kB lines; Telegram and DiscordChatExporter exports with
fields missing or of the wrong type; UTF-16, Latin-1 and bytes that are no encoding at all.
Each file gives messages that can be stored (text that encodes as UTF-8, aware times) or one
short ImportFileError line; nothing else escapes the reader. The command itself turns that line
into "error: ..." and exit status 2 (tests/bot/cli/test_memory.py)."""
from __future__ import annotations

import json

from hypothesis import example, given, strategies as st

from engine.memory.importers import ImportFileError, load_history
from tests.helpers.fuzz import fuzz, hostile_text

LONGEST_ERROR = 400   # the path, the line and what is wrong; never the 100 kB it quotes

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), hostile_text(),
                 st.just([]), st.just({}), st.lists(hostile_text(8, huge=False), max_size=2))
TIMES = st.one_of(JUNK, st.sampled_from(["2024-01-01T10:00:00Z", "2024-13-45", "9999-12-31T23:59:59+14:00",
                                         "0001-01-01T00:00:00-14:00", "", " ", "1e999"]),
                  st.integers(-2**40, 2**40), st.floats(-1e20, 1e20))


def record(draw) -> dict:
    rec = {"id": draw(st.one_of(st.integers(), JUNK)), "channel": draw(st.one_of(st.just("c"), JUNK)),
           "author": draw(st.one_of(st.just("ann"), JUNK)), "ts": draw(TIMES),
           "text": draw(st.one_of(hostile_text(), JUNK))}
    for key in draw(st.lists(st.sampled_from(list(rec)), max_size=2)):
        rec.pop(key, None)
    if draw(st.booleans()):
        rec[draw(st.sampled_from(["attachments", "author_id"]))] = draw(JUNK)
    return rec


@st.composite
def import_files(draw) -> bytes:
    kind = draw(st.sampled_from(["jsonl", "jsonl", "telegram", "discord", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    records = [record(draw) for _ in range(draw(st.integers(1, 4)))]
    if kind == "jsonl":
        lines = [json.dumps(r) for r in records]
        if draw(st.booleans()):   # a line cut short, or one that is no object
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = draw(st.sampled_from([lines[i][: len(lines[i]) // 2], "[1, 2]", "null", "{", "}"]))
        text = "\n".join(lines)
    elif kind == "telegram":
        messages = [{"id": r.get("id"), "date": r.get("ts"), "from": r.get("author"), "from_id": r.get("author_id"),
                     "text": r.get("text"), "type": draw(st.sampled_from(["message", "service", 5]))}
                    for r in records]
        text = json.dumps(draw(st.sampled_from([{"messages": messages, "name": "G", "id": 1},
                                                {"chats": {"list": [{"messages": messages}]}},
                                                {"chats": {"list": messages}}])))
    else:
        messages = [{"id": r.get("id"), "timestamp": r.get("ts"), "content": r.get("text"),
                     "author": draw(st.one_of(st.just({"id": "1", "name": "ann"}), JUNK))} for r in records]
        text = json.dumps({"guild": {"id": "1"}, "channel": draw(st.one_of(st.just({"id": "2"}), JUNK)),
                           "messages": messages})
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16", "latin-1"]))
    return text.encode(encoding, errors="surrogatepass" if encoding.startswith("utf") else "replace")


@fuzz(150)
@given(content=import_files())
@example(content=b'{"id": 1, "channel": "c", "author": "a", "ts": 1180591620717411303424, "text": "x"}')
@example(content=b'{"id": 1, "channel": "c", "author": "a", "ts": -99999999999999, "text": "x"}')
@example(content=b'{"id": 1, "channel": "c", "author": "a", "ts": "' + b"9" * 100_000 + b'", "text": "x"}')
@example(content=b'{"id": 1, "channel": "c", "author": "a", "ts": 1, "text": "\\ud800 lone"}')
@example(content=b'{"id": "1\\u0000", "channel": "c\\u0000", "author": "a\\u0000", "ts": 1, "text": "N\\u0000"}')
@example(content=b'{"guild": {"id": "1"}, "channel": true, "messages": []}')
@example(content=b'{"channel": {"id": 1}, "messages": [{"id": 0, "timestamp": "2024-01-01T00:00:00Z", "content": "hi", '
                 b'"author": {"id": "1", "name": ["ann"]}, "attachments": true}]}')
@example(content=b'{"messages": [{"id": 1, "date": "2024-01-01T00:00:00", "from": "a", "text": "\\udfff"}]}')
@example(content=("\u00e9t\u00e9 " * 30_000).encode("latin-1"))
@example(content=b'{"id": 1, "channel": "c", "author": "a", "ts": "9999-12-31T23:59:59-14:00", "text": "x"}')
@example(content=b'{"id": 1, "channel": "c", "author": "a", "ts": "0001-01-01T00:00:00+14:00", "text": "x"}')
def test_an_import_file_gives_storable_messages_or_one_short_line(tmp_path, content):
    path = tmp_path / "export.json"
    path.write_bytes(content)
    try:
        _, messages = load_history(path, "import:export")
    except ImportFileError as err:
        text = str(err)
        assert "\n" not in text and 0 < len(text) <= LONGEST_ERROR, text[:600]
        return
    for m in messages:
        for value in (m.text, m.author, m.channel, m.message_id, m.author_id, *m.attachments):
            assert isinstance(value, str)
            value.encode("utf-8")   # a lone surrogate cannot be stored on either database
            assert "\x00" not in value   # nor NUL on PostgreSQL
        assert m.ts.tzinfo is not None
