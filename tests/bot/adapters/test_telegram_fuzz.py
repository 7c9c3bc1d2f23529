"""Malformed Telegram updates, fuzzed, through the real python-telegram-bot and the inbox: the fake
Bot API sends messages with a field missing or of the wrong type (a chat id that is text, a
sender that is a list, an entity past the text's end, a date of 2**70, a document whose size is
a word), hostile text, updates of unknown kinds. Each is handled or dropped with at most one
log line and no traceback; its inbox row goes (nothing stuck for the next start); what was
stored before stays as it was; and the bot answers the next good command."""
from __future__ import annotations

import copy
import logging

import pytest
from hypothesis import example, given, strategies as st

from tests.fakes.telegram_server import USER_ID
from tests.helpers.fuzz import command_lines, fuzz, hostile_text
from tests.helpers.llm_fixtures import sqlite_only
from tests.helpers.telegram import text_of, tg  # noqa: F401  (tg: the Telegram app fixture)
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)

GROUP = -100777


def good_update(text: str = "/recall rain") -> dict:
    return {"message": {
        "message_id": 5, "date": 1_700_000_000, "text": text,
        "chat": {"id": GROUP, "type": "supergroup", "title": "Group"},
        "from": {"id": USER_ID, "is_bot": False, "first_name": "Ann"},
        "entities": [{"type": "bot_command", "offset": 0, "length": len(text.split(" ")[0])}],
        "document": {"file_id": "f1", "file_unique_id": "f1u", "file_name": "a.txt", "file_size": 10},
        "reply_to_message": {"message_id": 4, "date": 1_700_000_000, "chat": {"id": GROUP, "type": "supergroup"}},
    }}


PATHS = [("message",), ("message", "chat"), ("message", "chat", "id"), ("message", "chat", "type"),
         ("message", "from"), ("message", "from", "id"), ("message", "from", "is_bot"), ("message", "text"),
         ("message", "entities"), ("message", "entities", 0), ("message", "entities", 0, "offset"),
         ("message", "entities", 0, "length"), ("message", "entities", 0, "type"), ("message", "date"),
         ("message", "message_id"), ("message", "document"), ("message", "document", "file_size"),
         ("message", "document", "file_id"), ("message", "reply_to_message"),
         ("message", "reply_to_message", "chat"), ("message", "message_thread_id")]
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), hostile_text(20, huge=False),
                 st.just([]), st.just({}), st.lists(st.integers(), min_size=1, max_size=2),
                 st.dictionaries(st.sampled_from(["id", "type", "x"]), st.integers(), max_size=2))


def _at(obj, path: tuple):
    """The value at ``path`` inside ``obj``, or None where the path no longer leads anywhere."""
    for key in path:
        if isinstance(obj, dict) and key in obj or isinstance(obj, list) and isinstance(key, int) and key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


@st.composite
def malformed_updates(draw) -> dict:
    """A message update with a few fields missing or of the wrong type, or an update of a kind
    nobody asked for."""
    if draw(st.integers(0, 9)) == 0:
        return {draw(st.sampled_from(["edited_message", "channel_post", "poll", "x"])): draw(JUNK)}
    update = good_update(draw(command_lines(plain=True)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent, key = _at(update, path[:-1]), path[-1]
        if _at(parent, (key,)) is None:
            continue
        if draw(st.booleans()):
            parent.pop(key)
        else:
            parent[key] = draw(JUNK)
    return update


async def stored_messages(app) -> list[tuple]:
    return [tuple(r) for r in await app.db.fetchall("SELECT * FROM memory_messages ORDER BY id")]


async def consumed(app, server) -> None:
    """Wait until the bot confirmed every update and handled it (its inbox row is gone)."""
    async def done() -> bool:
        return not server._updates and not await app.db.fetchval("SELECT COUNT(*) FROM telegram_inbox")
    await until(done, 10, "the update confirmed and its inbox row deleted")


@pytest.fixture
async def seeded(tg):  # noqa: F811
    app, server, _, _ = tg
    server.push_message(GROUP, "the river floods every spring")
    await consumed(app, server)
    await app.settled()
    await app.memory.embedded()   # routed: its vector and world are in the snapshot, not filled in after it
    before = await stored_messages(app)
    assert before, "the seeded message was not stored"
    return app, server, before


@sqlite_only
@fuzz(30)
@given(update=malformed_updates())
@example(update={"message": None})
@example(update={"message": "text"})
@example(update={"message": {**good_update()["message"], "chat": {"id": "abc", "type": "group"}}})
@example(update={"message": {**good_update()["message"], "entities": [{"type": "bot_command", "offset": 99,
                                                                       "length": -5}]}})
@example(update={"message": {**good_update("/help " + "\u202e" * 4000)["message"], "date": 2**70}})
@example(update={"message": {**good_update("/simulate what next")["message"],
                             "document": {"file_id": "f", "file_unique_id": "u", "file_size": "ten"}}})
async def test_a_malformed_update_gets_at_most_one_log_line_and_breaks_nothing(seeded, caplog, update):
    app, server, before = seeded
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        server.push_raw(copy.deepcopy(update))
        await consumed(app, server)
        await app.settled()
    ours = [r for r in caplog.records if r.name.startswith(("bot", "engine", "telegram"))]
    assert len(ours) <= 1, [r.getMessage()[:300] for r in ours]
    for record in ours:
        assert record.exc_info is None and "\n" not in record.getMessage(), record.getMessage()[:2000]
    assert (await stored_messages(app))[:len(before)] == before


@sqlite_only
async def test_the_bot_answers_after_malformed_updates(seeded):
    app, server, before = seeded
    for update in [{"message": None}, {"message": {"chat": []}}, {"message": {**good_update()["message"],
                                                                              "from": "Ann"}}]:
        server.push_raw(update)
    await consumed(app, server)
    server.push_message(GROUP, "/help")
    answer = await server.wait_for("sendMessage", lambda c: "Commands:" in text_of(c), timeout=30)
    assert answer.params["chat_id"] == GROUP
    assert (await stored_messages(app))[:len(before)] == before
