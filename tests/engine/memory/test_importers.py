"""The three chat-export parsers, format detection, and the errors for bad files."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from engine.memory.importers import ImportFileError, load_history, read_history


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def jsonl(*rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_jsonl_sorted_by_time_and_blank_lines_skipped(tmp_path):
    path = write(tmp_path, "h.jsonl", jsonl(
        {"id": "b", "channel": "gen", "author": "ann", "ts": "2024-05-01T10:00:05+02:00", "text": "second"},
        {"id": "a", "channel": "gen", "author": "bob", "ts": "2024-05-01T08:00:00Z", "text": "first"},
    ) + "\n" + jsonl(
        {"id": 7, "channel": "dev", "author": "cy", "ts": "2024-05-01T08:00:10", "text": "third"},
        {"id": "skip", "channel": "dev", "author": "cy", "ts": "2024-05-01T09:00:00Z", "text": "  "}))
    fmt, records = read_history(path)
    assert fmt == "jsonl"
    assert [r.message_id for r in records] == ["a", "b", "7"]
    assert records[0].ts == datetime(2024, 5, 1, 8, 0, tzinfo=timezone.utc)
    assert records[1].ts == datetime(2024, 5, 1, 8, 0, 5, tzinfo=timezone.utc)
    assert (records[2].channel, records[2].author, records[2].text) == ("dev", "cy", "third")


def test_single_line_jsonl_is_detected(tmp_path):
    path = write(tmp_path, "one.txt", jsonl(
        {"id": "x", "channel": "c", "author": "a", "ts": "2024-01-01T00:00:00Z", "text": "hi"}))
    assert read_history(path)[0] == "jsonl"


@pytest.mark.parametrize("bad_line, expected", [
    ('{"id": "2", "channel": "c", "author": "a", "ts": "2024-01-01T00:00:00Z", "text": ', "line 2: not valid JSON"),
    ('{"id": "2", "channel": "c", "author": "a", "text": "no time"}', "line 2: missing ts"),
    ('{"id": "2", "channel": "c", "author": "a", "ts": "yesterday", "text": "x"}', "line 2: ts: not an ISO-8601 time"),
    ('["a list"]', "line 2: expected an object"),
])
def test_jsonl_errors_name_the_line(tmp_path, bad_line, expected):
    good = json.dumps({"id": "1", "channel": "c", "author": "a", "ts": "2024-01-01T00:00:00Z", "text": "ok"})
    path = write(tmp_path, "bad.jsonl", good + "\n" + bad_line + "\n")
    with pytest.raises(ImportFileError, match=expected):
        read_history(path, "jsonl")
    with pytest.raises(ImportFileError, match=expected):
        read_history(path)


TELEGRAM_CHAT = {
    "name": "Hiking club", "type": "private_supergroup", "id": 4242,
    "messages": [
        {"id": 3, "type": "message", "date": "2024-03-02T09:00:00", "date_unixtime": "1709370000",
         "from": "Ann", "from_id": "user1",
         "text": ["Trail ", {"type": "bold", "text": "closed"}, " after the storm"]},
        {"id": 1, "type": "service", "date": "2024-03-01T08:00:00", "actor": "Bob", "action": "invite_members",
         "text": ""},
        {"id": 2, "type": "message", "date": "2024-03-01T08:30:00", "from": None, "from_id": "user9",
         "text": "Who is coming on Saturday?"},
        {"id": 4, "type": "message", "date": "2024-03-02T09:01:00", "from": "Bob", "photo": "p.jpg", "text": ""},
    ],
}


def test_telegram_single_chat(tmp_path):
    fmt, records = read_history(write(tmp_path, "result.json", TELEGRAM_CHAT))
    assert fmt == "telegram"
    assert [(r.message_id, r.author, r.text) for r in records] == [
        ("2", "user9", "Who is coming on Saturday?"),
        ("3", "Ann", "Trail closed after the storm")]
    assert {r.channel for r in records} == {"4242"}
    assert records[1].ts == datetime.fromtimestamp(1709370000, tz=timezone.utc)


def test_telegram_full_export_prefixes_ids_per_chat(tmp_path):
    other = {"name": "Bob", "type": "personal_chat", "id": 7, "messages": [
        {"id": 2, "type": "message", "date": "2024-03-01T07:00:00", "from": "Bob", "text": "morning"}]}
    export = {"about": "...", "personal_information": {}, "chats": {"about": "...", "list": [TELEGRAM_CHAT, other]}}
    _, records = read_history(write(tmp_path, "result.json", export), "telegram")
    assert [r.message_id for r in records] == ["7/2", "4242/2", "4242/3"]


def test_telegram_bad_text_segment(tmp_path):
    chat = {"id": 1, "messages": [{"id": 1, "type": "message", "date": "2024-01-01T00:00:00", "text": [42]}]}
    with pytest.raises(ImportFileError, match="chat 1 message #0: unexpected text segment"):
        read_history(write(tmp_path, "result.json", chat))


DISCORD = {
    "guild": {"id": "900", "name": "Makers"},
    "channel": {"id": "901", "type": "GuildTextChat", "name": "general"},
    "messages": [
        {"id": "11", "type": "Default", "timestamp": "2023-06-01T12:00:01.250+00:00",
         "content": "Anyone tried the new resin printer?", "author": {"id": "1", "name": "ann", "nickname": "Ann"}},
        {"id": "10", "type": "GuildMemberJoin", "timestamp": "2023-06-01T11:00:00+00:00",
         "content": "Joined the server.", "author": {"id": "2", "name": "bob"}},
        {"id": "12", "type": "Reply", "timestamp": "2023-06-01T12:00:00+02:00",
         "content": "yes, smells bad", "author": {"id": "2", "name": "bob"}},
        {"id": "13", "type": "Default", "timestamp": "2023-06-01T12:05:00+00:00",
         "content": "", "attachments": [{"url": "x.png"}], "author": {"id": "2", "name": "bob"}},
    ],
    "messageCount": 4,
}


def test_discord_export(tmp_path):
    fmt, records = read_history(write(tmp_path, "general.json", DISCORD))
    assert fmt == "discord"
    assert [(r.message_id, r.author, r.channel) for r in records] == [("12", "bob", "901"), ("11", "ann", "901")]


def test_discord_missing_timestamp(tmp_path):
    doc = {**DISCORD, "messages": [{"id": "1", "content": "x", "author": {"name": "a"}}]}
    with pytest.raises(ImportFileError, match="message #0: missing id, timestamp or author"):
        read_history(write(tmp_path, "d.json", doc), "discord")


@pytest.mark.parametrize("content, expected", [
    ("", "the file is empty"),
    ('{"messages": [', "not valid JSON"),
    ('{"hello": "world"}', "unrecognised format"),
    ("just some text", "unrecognised format"),
])
def test_unrecognised_or_corrupt_files(tmp_path, content, expected):
    with pytest.raises(ImportFileError, match=expected):
        read_history(write(tmp_path, "x.json", content))


def test_not_utf8_and_missing_file(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"text": "caf\xe9"}\n')
    with pytest.raises(ImportFileError, match="not UTF-8"):
        read_history(path)
    with pytest.raises(ImportFileError, match="cannot read"):
        read_history(tmp_path / "nope.json")


def test_attached_files_come_along_for_search(tmp_path):
    row = {"id": "1", "channel": "gen", "author": "ann", "ts": "2024-05-01T08:00:00Z", "text": "see the photo"}
    _, records = read_history(write(tmp_path, "h.jsonl", jsonl({**row, "attachments": ["bike.jpg", "a red bike"]})))
    assert records[0].attachments == ("bike.jpg", "a red bike")
    with pytest.raises(ImportFileError, match="line 1: attachments must be a list of strings"):
        read_history(write(tmp_path, "bad.jsonl", jsonl({**row, "attachments": "bike.jpg"})))

    chat = {"id": 5, "messages": [
        {"id": 1, "type": "message", "date": "2024-03-01T08:00:00", "from": "Ann", "text": "the minutes",
         "file": "files/minutes.pdf", "file_name": "Minutes March.pdf"},
        {"id": 2, "type": "message", "date": "2024-03-01T08:01:00", "from": "Bob", "text": "holiday!",
         "photo": "photos/photo_1@01-03-2024.jpg"},
        {"id": 3, "type": "message", "date": "2024-03-01T08:02:00", "from": "Bob", "text": "the slides",
         "file": "(File not included. Change data exporting settings to download.)"}]}
    _, records = read_history(write(tmp_path, "result.json", chat))
    assert [r.attachments for r in records] == [("Minutes March.pdf",), (), ()]

    doc = {**DISCORD, "messages": [{**DISCORD["messages"][0], "attachments": [
        {"id": "5", "url": "https://cdn/x.png", "fileName": "resin_print.png", "fileSizeBytes": 100}]}]}
    _, records = read_history(write(tmp_path, "d.json", doc))
    assert records[0].attachments == ("resin_print.png",)
    _, messages = load_history(tmp_path / "d.json", "discord:900")
    assert messages[0].attachments == ("resin_print.png",)
