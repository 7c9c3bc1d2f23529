"""Malformed Discord gateway events, fuzzed, through the real discord.py: the fake gateway sends
messages and slash commands with a field missing or of the wrong type (an author that is a list,
an id that is a word, a timestamp that is a number, an option of the wrong type or name, 100 kB
option values). Each is handled or dropped with at most one log line and no traceback from the
bot; the gateway connection stays up (the next slash command is answered); what was stored
before stays as it was."""
from __future__ import annotations

import copy
import logging

import pytest
from hypothesis import example, given, strategies as st

from tests.fakes.discord_server import CHANNEL
from tests.helpers.discord import fake, start_bot, stop_bot, wait_for_texts  # noqa: F401  (fake: the fixture)
from tests.helpers.fuzz import full_registry, fuzz, hostile_text

pytestmark = pytest.mark.timeout(240)

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), hostile_text(20, huge=False),
                 st.just([]), st.just({}), st.lists(st.integers(), min_size=1, max_size=2),
                 st.dictionaries(st.sampled_from(["id", "type", "name", "value"]), st.integers(), max_size=2))
MESSAGE_FIELDS = ["id", "channel_id", "author", "content", "timestamp", "attachments", "mentions", "type",
                  "member", "guild_id", "message_reference", "referenced_message"]
INTERACTION_FIELDS = ["id", "type", "token", "channel_id", "channel", "member", "guild_id", "data", "app_permissions"]


def _mutate(draw, payload: dict, fields: list[str]) -> dict:
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(fields))
        if draw(st.booleans()):
            payload.pop(key, None)
        else:
            payload[key] = draw(JUNK)
    return payload


def _option(draw, arg) -> dict:
    kinds = {"int": 4, "float": 10, "attachment": 11}
    value = draw(st.one_of(hostile_text(), JUNK, st.integers(-2**70, 2**70)))
    return {"name": draw(st.one_of(st.just(arg.name), hostile_text(8, huge=False))),
            "type": draw(st.one_of(st.just(kinds.get(arg.type, 3)), st.integers(-1, 12))), "value": value}


def events(server):
    @st.composite
    def draw_event(draw) -> tuple[str, dict]:
        if draw(st.booleans()):
            message = server.message_payload(CHANNEL, draw(hostile_text()), {"id": "6000", "username": "ann",
                                                                               "discriminator": "0"})
            message["guild_id"] = server.guild_of(CHANNEL)
            return "MESSAGE_CREATE", _mutate(draw, message, MESSAGE_FIELDS) if draw(st.booleans()) else message
        registry = full_registry()
        command = registry.get(draw(st.sampled_from(sorted(registry.commands))))
        options = [_option(draw, arg) for arg in draw(st.lists(st.sampled_from(command.args), max_size=4))
                   ] if command.args else []
        payload = server.interaction_payload({"id": server.next_id(), "name": command.name, "type": 1,
                                              "options": options})
        return "INTERACTION_CREATE", _mutate(draw, payload, INTERACTION_FIELDS) if draw(st.booleans()) else payload
    return draw_event()


async def stored_messages(app) -> list[tuple]:
    return [tuple(r) for r in await app.db.fetchall("SELECT * FROM memory_messages ORDER BY id")]


async def answered(server) -> None:
    """Send /help and wait for its answer: the gateway connection is up and every earlier event read."""
    payload = await server.interaction("help")
    await server.wait_for("POST", f"/interactions/{payload['id']}/", timeout=20)


@pytest.fixture
async def bot(tmp_path, monkeypatch, fake):  # noqa: F811
    app, stop, task, _, _ = await start_bot(tmp_path, monkeypatch, fake, message_content=True)
    await fake.message("the river floods every spring")
    await wait_for_texts(app, 1)
    await app.memory.embedded()   # routed: its vector and world are in the snapshot, not filled in after it
    yield app, fake, await stored_messages(app)
    await stop_bot(app, stop, task)


def known(server, case: str) -> tuple[str, dict]:
    """The malformed events that once took the bot off Discord or failed inside a command."""
    if case == "author":   # an author that is no user: discord.py's parser raised out of Client.connect
        return "MESSAGE_CREATE", {**server.message_payload(CHANNEL, "hi", []), "guild_id": "2000"}
    if case == "list value":   # a text option that is a list reached the database
        return "INTERACTION_CREATE", server.interaction_payload(
            {"id": server.next_id(), "name": "cancel", "type": 1, "options": [{"name": "job", "type": 3,
                                                                                "value": ["a"]}]})
    # a command name that is no text: discord.py's task raised, unretrieved
    return "INTERACTION_CREATE", server.interaction_payload({"id": server.next_id(), "name": {}, "type": 1})


@fuzz(30)
@given(data=st.data())
@example(data="author")
@example(data="list value")
@example(data="name")
async def test_a_malformed_event_gets_at_most_one_log_line_and_the_bot_goes_on(bot, caplog, data):
    app, server, before = bot
    if isinstance(data, str):
        event, payload = known(server, data)
    else:
        event, payload = data.draw(events(server), label="event")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await server.dispatch(event, copy.deepcopy(payload))
        await answered(server)
    ours = [r for r in caplog.records if r.name.startswith(("bot", "engine", "discord"))]
    assert len(ours) <= 1, [r.getMessage()[:300] for r in ours]
    for record in ours:
        assert record.exc_info is None and "\n" not in record.getMessage(), record.getMessage()[:2000]
    assert (await stored_messages(app))[:len(before)] == before
