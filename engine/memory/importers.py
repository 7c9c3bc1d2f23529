"""Chat history importers: JSONL, Telegram Desktop JSON export, DiscordChatExporter JSON.

``load_history`` turns a file into ``MemoryMessage``s of one scope for
``MemoryEngine.ingest_many``. Each parser returns ``ChatRecord``s in chronological order (stable for equal times).
``detect_format`` guesses the format from the content, not the file name. Attached files'
names (and, in JSONL, any captions) come along so memory can search them with the text. Authors'
platform ids come along where the export gives them (DiscordChatExporter's author id, Telegram's
``from_id`` of a user, JSONL's optional ``author_id``), so a member's opt-out and /forget me reach
their imported messages; elsewhere only the author's name is known. A broken or
unexpected file raises ``ImportFileError`` with one message that says where (the line number
for JSONL, the message index for the JSON exports).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from engine.memory.models import MemoryMessage

FORMATS = ("jsonl", "telegram", "discord")
JSONL_FIELDS = ("id", "channel", "author", "ts", "text")  # required; "attachments", "author_id" optional
# DiscordChatExporter message types that carry what a person wrote; the others are
# system notices (joins, pins, boosts) whose content the exporter generates.
DISCORD_TEXT_TYPES = {"Default", "Reply"}


class ImportFileError(ValueError):
    """The file cannot be imported; the message names the file and the place."""


@dataclass(frozen=True)
class ChatRecord:
    message_id: str
    channel: str
    author: str
    text: str
    ts: datetime  # timezone-aware, UTC
    attachments: tuple[str, ...] = ()  # names (and captions) of its attached files
    author_id: str = ""  # the author's platform id where the export gives it


def _quoted(value: Any, limit: int = 60) -> str:
    """``value`` for an error message: its repr, at most ``limit`` characters of it."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def parse_time(value: Any) -> datetime:
    """ISO-8601 text (``Z`` allowed; no zone means UTC) or a Unix epoch number -> aware UTC."""
    if isinstance(value, bool):
        raise ValueError(f"not a time: {_quoted(value)}")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):   # past year 9999, or not a number (nan)
            raise ValueError(f"not a time: {_quoted(value)}") from None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"not a time: {_quoted(value)}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an ISO-8601 time: {_quoted(value)}") from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    try:
        return ts.astimezone(timezone.utc)
    except OverflowError:   # a zone that moves the first or last day of the calendar past it
        raise ValueError(f"not a time: {_quoted(value)}") from None


def read_text(path: Path) -> str:
    """The file's text (UTF-8, with or without a byte-order mark); ImportFileError in one line."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ImportFileError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ImportFileError(f"{path}: not UTF-8 text (byte {err.start})") from None


def _load_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ImportFileError(
            f"{path}: not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}") from None


def _chronological(records: list[ChatRecord]) -> list[ChatRecord]:
    return sorted(records, key=lambda r: r.ts)  # sorted() is stable: file order breaks ties


def jsonl_objects(path: Path, text: str, fields: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of a JSONL text; ImportFileError names the
    line that is not a JSON object (of ``fields``)."""
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise ImportFileError(f"{path}: line {lineno}: not valid JSON: {err.msg} (column {err.colno})") from None
        if not isinstance(obj, dict):
            raise ImportFileError(f"{path}: line {lineno}: expected an object with {fields}")
        yield lineno, obj


def parse_jsonl(path: Path, text: str | None = None) -> list[ChatRecord]:
    text = read_text(path) if text is None else text
    records = []
    for lineno, obj in jsonl_objects(path, text, ", ".join(JSONL_FIELDS)):
        where = f"{path}: line {lineno}"
        missing = [k for k in JSONL_FIELDS if obj.get(k) is None]
        if missing:
            raise ImportFileError(f"{where}: missing {', '.join(missing)}")
        if not isinstance(obj["text"], str):
            raise ImportFileError(f"{where}: text must be a string")
        try:
            ts = parse_time(obj["ts"])
        except ValueError as err:
            raise ImportFileError(f"{where}: ts: {err}") from None
        files = obj.get("attachments", [])
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ImportFileError(f"{where}: attachments must be a list of strings")
        author_id = obj.get("author_id")
        if author_id is not None and not isinstance(author_id, (str, int)):
            raise ImportFileError(f"{where}: author_id must be a string")
        if obj["text"].strip():
            records.append(ChatRecord(str(obj["id"]), str(obj["channel"]), str(obj["author"]),
                                      obj["text"], ts, tuple(files), str(author_id or "")))
    return _chronological(records)


def telegram_text(value: Any) -> str:
    """Telegram's ``text`` is a string or a list of strings and entity objects with ``text``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise ValueError(f"unexpected text segment {part!r:.60}")
        return "".join(parts)
    raise ValueError(f"text must be a string or a list, got {type(value).__name__}")


def _telegram_file(msg: dict) -> tuple[str, ...]:
    """The shared file's name: ``file_name``, else the exported file's own name (a photo's is a
    generated one, and an export without files says "(File not included...)" instead)."""
    name = msg.get("file_name") or msg.get("file")
    if not isinstance(name, str) or not name.strip() or name.startswith("("):
        return ()
    return (Path(name).name,)


def _telegram_chats(path: Path, data: dict) -> list[dict]:
    if "messages" in data:
        return [data]
    chats = data.get("chats")
    if isinstance(chats, dict) and isinstance(chats.get("list"), list):
        return chats["list"]
    raise ImportFileError(f"{path}: a Telegram export has `messages` (one chat) or `chats.list`")


def parse_telegram(path: Path, data: Any = None) -> list[ChatRecord]:
    data = _load_json(path, read_text(path)) if data is None else data
    if not isinstance(data, dict):
        raise ImportFileError(f"{path}: a Telegram export is a JSON object")
    chats = _telegram_chats(path, data)
    several = len(chats) > 1
    records = []
    for ci, chat in enumerate(chats):
        if not isinstance(chat, dict) or not isinstance(chat.get("messages"), list):
            raise ImportFileError(f"{path}: chats.list[{ci}] has no messages list")
        chat_id = str(chat.get("id", ci))
        for mi, msg in enumerate(chat["messages"]):
            where = f"{path}: chat {chat_id} message #{mi}"
            if not isinstance(msg, dict):
                raise ImportFileError(f"{where}: expected an object")
            if msg.get("type", "message") != "message":
                continue  # service messages: joins, pins, calls
            if "id" not in msg or not (msg.get("date_unixtime") or msg.get("date")):
                raise ImportFileError(f"{where}: missing id or date")
            try:
                # date_unixtime is exact; `date` is the exporting computer's local time.
                if msg.get("date_unixtime"):
                    ts = parse_time(int(msg["date_unixtime"]))
                else:
                    ts = parse_time(msg["date"])
                text = telegram_text(msg.get("text", ""))
            except ValueError as err:
                raise ImportFileError(f"{where}: {err}") from None
            if not text.strip():
                continue  # photos, stickers and files without a caption
            author = msg.get("from") or msg.get("from_id") or "unknown"
            mid = f"{chat_id}/{msg['id']}" if several else str(msg["id"])
            sender = str(msg.get("from_id") or "")   # "user123" for a person (a channel's posts: "channel…")
            records.append(ChatRecord(mid, chat_id, str(author), text, ts, _telegram_file(msg),
                                      sender[4:] if sender.startswith("user") else ""))
    return _chronological(records)


def parse_discord(path: Path, data: Any = None) -> list[ChatRecord]:
    data = _load_json(path, read_text(path)) if data is None else data
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise ImportFileError(f"{path}: a DiscordChatExporter export is an object with `messages`")
    channel = data.get("channel") or {}
    if not isinstance(channel, dict):
        raise ImportFileError(f"{path}: `channel` must be an object with an id or a name")
    channel_id = str(channel.get("id") or channel.get("name") or "discord")
    records = []
    for mi, msg in enumerate(data["messages"]):
        where = f"{path}: message #{mi}"
        if not isinstance(msg, dict):
            raise ImportFileError(f"{where}: expected an object")
        if msg.get("type", "Default") not in DISCORD_TEXT_TYPES:
            continue
        author = msg.get("author")
        if "id" not in msg or "timestamp" not in msg or not isinstance(author, dict):
            raise ImportFileError(f"{where}: missing id, timestamp or author")
        content = msg.get("content") or ""
        if not isinstance(content, str):
            raise ImportFileError(f"{where}: content must be a string")
        try:
            ts = parse_time(msg["timestamp"])
        except ValueError as err:
            raise ImportFileError(f"{where}: timestamp: {err}") from None
        attachments = msg.get("attachments") or []
        if not isinstance(attachments, list):
            raise ImportFileError(f"{where}: attachments must be a list")
        if content.strip():
            name = author.get("name") or author.get("nickname") or author.get("id") or "unknown"
            if not isinstance(name, (str, int)):
                raise ImportFileError(f"{where}: the author's name must be a string")
            name = str(name)
            files = tuple(a["fileName"] for a in attachments
                          if isinstance(a, dict) and isinstance(a.get("fileName"), str) and a["fileName"])
            records.append(ChatRecord(str(msg["id"]), channel_id, name, content, ts, files,
                                      str(author.get("id") or "")))
    return _chronological(records)


def detect_format(path: Path, text: str) -> tuple[str, Any]:
    """Return the format name and, for the JSON exports, the already parsed document."""
    stripped = text.lstrip()
    if not stripped:
        raise ImportFileError(f"{path}: the file is empty")
    if stripped[0] == "{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            first = stripped.splitlines()[0]
            if first.rstrip().endswith("}"):
                return "jsonl", None  # one object per line; parse_jsonl reports bad lines
            raise ImportFileError(
                f"{path}: not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}") from None
        if isinstance(data, dict):
            if "guild" in data and "messages" in data:
                return "discord", data
            if "messages" in data or "chats" in data:
                return "telegram", data
            if "text" in data and "ts" in data:
                return "jsonl", None
    raise ImportFileError(
        f"{path}: unrecognised format; expected JSONL ({', '.join(JSONL_FIELDS)} per line), "
        "a Telegram Desktop result.json or a DiscordChatExporter JSON file")


PARSERS: dict[str, Callable[..., list[ChatRecord]]] = {
    "jsonl": parse_jsonl, "telegram": parse_telegram, "discord": parse_discord}


def read_history(path: str | Path, fmt: str = "auto") -> tuple[str, list[ChatRecord]]:
    """Parse a chat export; returns (format, records in chronological order)."""
    path = Path(path)
    if fmt != "auto" and fmt not in PARSERS:
        raise ImportFileError(f"unknown format {fmt!r}; choose auto, {', '.join(FORMATS)}")
    text = read_text(path)
    if fmt == "auto":
        fmt, data = detect_format(path, text)
    elif fmt == "jsonl":
        data = None
    else:
        data = _load_json(path, text)
    if fmt == "jsonl":
        return fmt, parse_jsonl(path, text)
    return fmt, PARSERS[fmt](path, data)


def load_history(path: str | Path, scope: str, fmt: str = "auto") -> tuple[str, list[MemoryMessage]]:
    """Parse a chat export into the scope's memory messages, oldest first."""
    fmt, records = read_history(path, fmt)
    return fmt, [MemoryMessage(scope, r.channel, r.message_id, r.author, r.text, r.ts, author_id=r.author_id,
                               attachments=r.attachments) for r in records]
