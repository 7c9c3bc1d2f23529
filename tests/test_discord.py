"""The Discord adapter through the real discord.py, against a fake REST + gateway + CDN."""
from __future__ import annotations

import asyncio

import pytest

from bot.adapters import discord_adapter
from tests.chat_helpers import add_test_simulation, make_app
from tests.fakes.discord_server import ADMIN_ROLE, CHANNEL, GUILD, MANAGE_GUILD, EVERYONE_PERMS, FakeDiscord

pytestmark = pytest.mark.timeout(60)
EPHEMERAL = 64


@pytest.fixture
async def fake():
    server = await FakeDiscord().start()
    yield server
    await server.stop()


async def start_bot(tmp_path, monkeypatch, server, **discord_cfg):
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    app = await make_app(tmp_path, discord={"token_env": "DISCORD_TEST_TOKEN", "api_base": server.api_base,
                                            "gateway_url": server.gateway_url, **discord_cfg})
    gate = asyncio.Event()
    runs = add_test_simulation(app, gate)
    await app.start()
    stop = asyncio.Event()
    task = asyncio.create_task(discord_adapter.serve(app, stop))
    await asyncio.wait_for(server.identified.wait(), 10)
    for _ in range(100):  # on_ready registers the outlet once the guild arrived
        if "discord" in app.outlets:
            break
        await asyncio.sleep(0.05)
    return app, stop, task, gate, runs


async def stop_bot(app, stop, task):
    await app.jobs.shutdown()
    stop.set()
    await asyncio.wait_for(task, 15)
    await app.close()


async def test_slash_command_with_attachment_to_progress_edits_and_report_upload(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, admin_role="botadmin")
    try:
        att = fake.add_attachment("news.txt", b"Floods closed the bridge.")
        await fake.interaction("testsim", [
            {"name": "document", "type": 11, "value": att["id"]},
            {"name": "requirement", "type": 3, "value": "what next?"}],
            member=fake.member("6001", roles=(ADMIN_ROLE,)), attachments=[att])
        defer = await fake.wait_for("POST", "/callback")
        assert defer.json["type"] == 5  # deferred at once
        started = await fake.wait_for("POST", "/webhooks/", lambda c: "Started" in c.content)
        assert started.query.get("wait") == "true" or started.query.get("wait") == "1"
        progress = await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: "⏳" in c.content)
        await fake.wait_for("PATCH", f"/channels/{CHANNEL}/messages/", lambda c: "25%" in c.content)
        gate.set()
        await fake.wait_for("PATCH", f"/channels/{CHANNEL}/messages/", lambda c: "75%" in c.content)
        upload = await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: bool(c.files))
        (name, data), = upload.files.values()
        assert name.startswith("report-") and b"Floods closed the bridge." in data
        await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: "finished" in c.content)
        assert runs == [{"text": "Floods closed the bridge.", "requirement": "what next?"}]
        job = (await app.jobs.list(scope=f"discord:{GUILD}"))[0]
        assert job.state == "done" and job.channel == CHANNEL
        assert progress.json["content"].startswith("⏳")
    finally:
        await stop_bot(app, stop, task)


async def test_admin_commands_are_refused_ephemerally_without_role_or_manage_server(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, admin_role="botadmin")
    try:
        await fake.interaction("settings", [{"name": "key", "type": 3, "value": "memory"},
                                            {"name": "value", "type": 3, "value": "off"}])
        refusal = await fake.wait_for("POST", "/callback")
        assert refusal.json["type"] == 4 and refusal.json["data"]["flags"] & EPHEMERAL
        assert "botadmin" in refusal.json["data"]["content"]
        assert await app.get_setting(f"discord:{GUILD}", "", "memory") is None
        await fake.interaction("settings", [{"name": "key", "type": 3, "value": "memory"},
                                            {"name": "value", "type": 3, "value": "off"}],
                               member=fake.member("6002", permissions=EVERYONE_PERMS | MANAGE_GUILD))
        await fake.wait_for("POST", "/webhooks/", lambda c: "memory set" in c.content)
        assert await app.get_setting(f"discord:{GUILD}", "", "memory") == "off"
    finally:
        await stop_bot(app, stop, task)


async def test_usage_errors_are_ephemeral_and_replace_the_thinking_message(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        await fake.interaction("digest", [{"name": "action", "type": 3, "value": "on"},
                                          {"name": "time", "type": 3, "value": "25:99"}])
        error = await fake.wait_for("POST", "/webhooks/", lambda c: "18:30" in c.content)
        assert error.json["flags"] & EPHEMERAL
        assert fake.calls_to("DELETE", "/messages/@original")
    finally:
        await stop_bot(app, stop, task)


async def test_plain_messages_are_ingested_with_the_message_content_intent(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, message_content=True)
    seen = []

    async def listener(msg):
        seen.append(msg)
    app.listeners.append(listener)
    try:
        assert fake.identify["intents"] & (1 << 15)  # MESSAGE_CONTENT requested
        await fake.message("the bridge reopens on Monday", author_id="6003")
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.05)
        assert [(m.scope, m.channel, m.author_id, m.text) for m in seen] == [
            (f"discord:{GUILD}", CHANNEL, "6003", "the bridge reopens on Monday")]
    finally:
        await stop_bot(app, stop, task)


async def test_sync_publishes_every_command_with_typed_options(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    app = await make_app(tmp_path, discord={"token_env": "DISCORD_TEST_TOKEN", "api_base": fake.api_base,
                                            "gateway_url": fake.gateway_url})
    add_test_simulation(app)
    try:
        names = await discord_adapter.sync_commands(app, int(GUILD))
    finally:
        await app.close()
    put = fake.calls_to("PUT", f"/guilds/{GUILD}/commands")[0]
    published = {c["name"]: c for c in put.json}
    assert set(names) == set(published) >= {"help", "digest", "settings", "testsim"}
    sim = {o["name"]: o for o in published["testsim"]["options"]}
    assert sim["document"]["type"] == 11 and sim["document"]["required"]
    assert sim["requirement"]["type"] == 3 and sim["rounds"]["type"] == 4 and not sim["rounds"].get("required")
    digest = {o["name"]: o for o in published["digest"]["options"]}
    assert [c["value"] for c in digest["action"]["choices"]] == ["on", "off", "now", "status"]
    assert all(len(c["description"]) <= 100 for c in put.json)
