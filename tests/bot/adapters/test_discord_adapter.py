"""The Discord adapter through the real discord.py, against a fake REST + gateway + CDN."""
from __future__ import annotations

import asyncio

import pytest

from bot.adapters import discord_adapter
from tests.fakes.discord_server import ADMIN_ROLE, CHANNEL, EVERYONE_PERMS, GUILD, MANAGE_GUILD, OWNER
from tests.helpers.chat import add_test_simulation, make_app
from tests.helpers.discord import fake, start_bot, stop_bot, wait_for_texts  # noqa: F401  (fake: the fixture)
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(60)
EPHEMERAL = 64


async def test_slash_command_with_attachment_to_progress_edits_and_report_upload(tmp_path, monkeypatch, fake, db_url):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, admin_role=ADMIN_ROLE,
                                                  db_url=db_url)
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


async def test_an_echoed_everyone_pings_nobody(tmp_path, monkeypatch, fake):
    """Text the bot echoes (a remembered message through /recall) may hold @everyone, a role or a
    user mention: every message the bot posts, follows up, edits or refuses with tells Discord to
    parse no mention at all."""
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, message_content=True)
    try:
        await fake.message(f"@everyone the harbour strike starts Monday <@&{ADMIN_ROLE}> <@6003>")
        async with asyncio.timeout(30):
            while not await app.db.fetchval("SELECT count(*) FROM memory_messages"):
                await asyncio.sleep(0.05)
        await fake.interaction("recall", [{"name": "query", "type": 3, "value": "harbour strike"}])
        echoed = await fake.wait_for("POST", "/webhooks/", lambda c: "@everyone the harbour" in c.content)
        assert echoed.json["allowed_mentions"] == {"parse": []}
        await fake.interaction("settings", [{"name": "key", "type": 3, "value": "memory"},
                                            {"name": "value", "type": 3, "value": "off"}])   # refused
        att = fake.add_attachment("news.txt", b"Floods closed the bridge.")
        await fake.interaction("testsim", [{"name": "document", "type": 11, "value": att["id"]},
                                           {"name": "requirement", "type": 3, "value": "@everyone what next?"}],
                               member=fake.member("6001", permissions=EVERYONE_PERMS | MANAGE_GUILD),
                               attachments=[att])
        await fake.wait_for("PATCH", f"/channels/{CHANNEL}/messages/", lambda c: "25%" in c.content)
        gate.set()
        await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: "finished" in c.content)
        bodies = [(c.method, c.path, c.json.get("data") if c.path.endswith("/callback") else c.json)
                  for c in fake.calls if c.method in ("POST", "PATCH") and isinstance(c.json, dict)]
        posts = [(method, path, body) for method, path, body in bodies if body and body.get("content")]
        kinds = {(method, path.split("/")[1]) for method, path, _ in posts}
        assert {("POST", "webhooks"), ("POST", "interactions"), ("POST", "channels"), ("PATCH", "channels")} <= kinds
        for method, path, body in posts:
            assert body.get("allowed_mentions") == {"parse": []}, (method, path, body["content"])
    finally:
        await stop_bot(app, stop, task)


async def test_ask_shows_the_typing_indicator_in_its_channel(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        await fake.interaction("ask", [{"name": "question", "type": 3, "value": "where is the ferry?"}])
        await fake.wait_for("POST", f"/channels/{CHANNEL}/typing")
        await fake.wait_for("POST", "/webhooks/")  # the answer follows
    finally:
        await stop_bot(app, stop, task)


async def test_admin_commands_are_refused_ephemerally_without_role_or_manage_server(tmp_path, monkeypatch, fake,
                                                                                  db_url):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, admin_role=ADMIN_ROLE,
                                                  db_url=db_url)
    try:
        await fake.interaction("settings", [{"name": "key", "type": 3, "value": "memory"},
                                            {"name": "value", "type": 3, "value": "off"}])
        refusal = await fake.wait_for("POST", "/callback")
        assert refusal.json["type"] == 4 and refusal.json["data"]["flags"] & EPHEMERAL
        assert f"<@&{ADMIN_ROLE}>" in refusal.json["data"]["content"]
        assert await app.get_setting(f"discord:{GUILD}", CHANNEL, "memory") is None
        await fake.interaction("settings", [{"name": "key", "type": 3, "value": "memory"},
                                            {"name": "value", "type": 3, "value": "off"}],
                               member=fake.member("6002", permissions=EVERYONE_PERMS | MANAGE_GUILD))
        await fake.wait_for("POST", "/webhooks/", lambda c: "memory set" in c.content)
        assert await app.get_setting(f"discord:{GUILD}", CHANNEL, "memory") == "off"
    finally:
        await stop_bot(app, stop, task)


async def test_the_admin_role_is_matched_by_id_never_by_name(tmp_path, monkeypatch, fake):
    """A member who made a role named like the configured one (here: named after its id) is no
    administrator; the holder of the role with that id is."""
    fake.roles["4100"] = {"id": "4100", "name": ADMIN_ROLE, "permissions": str(EVERYONE_PERMS), "position": 3}
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, admin_role=ADMIN_ROLE)
    settings = [{"name": "key", "type": 3, "value": "memory"}, {"name": "value", "type": 3, "value": "off"}]
    try:
        await fake.interaction("settings", settings, member=fake.member("6005", roles=("4100",)))
        refusal = await fake.wait_for("POST", "/callback")
        assert refusal.json["type"] == 4 and "only an administrator" in refusal.json["data"]["content"]
        assert await app.get_setting(f"discord:{GUILD}", CHANNEL, "memory") is None
        await fake.interaction("settings", settings, member=fake.member("6006", roles=(ADMIN_ROLE,)))
        await fake.wait_for("POST", "/webhooks/", lambda c: "memory set" in c.content)
        assert await app.get_setting(f"discord:{GUILD}", CHANNEL, "memory") == "off"
    finally:
        await stop_bot(app, stop, task)


async def test_usage_errors_are_ephemeral_and_replace_the_thinking_message(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        await fake.interaction("digest", [{"name": "action", "type": 3, "value": "on"},
                                          {"name": "time", "type": 3, "value": "25:99"}],
                               member=fake.member("6002", permissions=EVERYONE_PERMS | MANAGE_GUILD))
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
    app.listeners.insert(0, listener)  # before memory ingestion, which may load a model first
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
    assert all(len(c.get("description", "")) <= 100 for c in put.json)
    menu = published["Forget this message"]   # a message context-menu command: no options, no description
    assert menu["type"] == 3 and not menu.get("options")
    for command in published.values():  # Discord wants required options first
        flags = [bool(o.get("required")) for o in command.get("options", [])]
        assert flags == sorted(flags, reverse=True), command["name"]
    if "simulate" in published:  # the real command: several documents become files, files2, files3
        opts = {o["name"]: o for o in published["simulate"]["options"]}
        assert [opts[n]["type"] for n in ("files", "files2", "files3")] == [11, 11, 11]
        # documents are optional (a brief is drafted without them), so the required text comes first
        assert not opts["files"].get("required") and opts["requirement"]["required"]
        assert published["simulate"]["options"][0]["name"] == "requirement"
        assert opts["from_chat"]["type"] == 5 and opts["world"]["type"] == 3   # a flag is a boolean option



def add_talker(app):
    @app.commands.command("bigtalk", "talks a lot")
    async def bigtalk(ctx):
        await ctx.reply.send("\n".join(f"line {i} " + "x" * 60 for i in range(40)))  # 2.7k: two messages
        await ctx.reply.send("y" * 7000)  # too long for messages: one file
        huge = ctx.app.config.data_dir / "huge.bin"
        huge.write_bytes(b"0" * 20000)
        await ctx.reply.upload(huge, "the data")


async def test_long_answers_are_split_or_sent_as_files_and_oversized_uploads_explained(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, extra=add_talker,
                                                  max_upload_mb=0.01)
    try:
        await fake.interaction("bigtalk")
        await fake.wait_for("POST", "/webhooks/", lambda c: "huge.bin" in c.content)
        posts = [c for c in fake.calls_to("POST", "/webhooks/")]
        texts = [c.content for c in posts if not c.files]
        assert texts[0].startswith("line 0") and texts[1].rstrip().endswith("x" * 60) and len(texts) == 3
        assert all(len(t) <= 2000 for t in texts)
        (name, data), = [f for c in posts for f in c.files.values()]
        assert name.endswith(".md") and data == b"y" * 7000
        assert "huge.bin is 19.5 KiB, more than the 10.2 KiB" in texts[2] and "not attached" in texts[2]
        assert not list((app.config.data_dir / "outgoing").rglob("*.md"))  # deleted once uploaded
        assert (app.config.data_dir / "huge.bin").exists()  # not the bot's to delete
    finally:
        await stop_bot(app, stop, task)


async def test_the_owner_syncs_commands_with_a_message_and_others_cannot(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        await fake.message("!sync", author_id="6009")  # not the application's owner: ignored
        await fake.message("!sync", author_id=OWNER)
        done = await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: "Synced" in c.content)
        assert "testsim" in done.content
        assert len(fake.calls_to("PUT", f"/guilds/{GUILD}/commands")) == 1
        assert not fake.calls_to("PUT", "/applications/1000/commands")  # nothing synced globally at start
    finally:
        await stop_bot(app, stop, task)


async def test_a_retried_channel_post_is_not_posted_twice(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        fake.fail_after_create = 1  # the first answer is lost after Discord created the message
        await app.reply_to(f"discord:{GUILD}", CHANNEL).send("the flood digest")
        posts = fake.calls_to("POST", f"/channels/{CHANNEL}/messages")
        assert len(posts) == 2 and posts[0].json["nonce"] == posts[1].json["nonce"]
        assert posts[0].json["enforce_nonce"] is True
        assert [m["content"] for m in fake.messages.values()].count("the flood digest") == 1
    finally:
        await stop_bot(app, stop, task)



async def test_jobs_interrupted_by_a_restart_are_announced_in_their_channel(tmp_path, monkeypatch, fake, db_url):
    async def left_running(app):  # what a killed process leaves behind
        await app.db.execute(
            "INSERT INTO jobs(id, kind, scope, channel, title, params, state, message, created_at, updated_at)"
            " VALUES ('dead0001', 'simulation', ?, ?, 'simulation of a.txt', '{}', 'running', '', '2026-01-01',"
            " '2026-01-01')", (f"discord:{GUILD}", CHANNEL))

    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, before_start=left_running,
                                                  db_url=db_url)
    try:
        note = await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: "dead0001" in c.content)
        assert "interrupted" in note.content and "/resume dead0001" in note.content
    finally:
        await stop_bot(app, stop, task)


async def test_attachments_over_the_download_limit_are_refused_privately(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake, admin_role=ADMIN_ROLE)
    try:
        att = fake.add_attachment("huge.pdf", b"%PDF", size=30 * 2**20)
        await fake.interaction("testsim", [
            {"name": "document", "type": 11, "value": att["id"]},
            {"name": "requirement", "type": 3, "value": "what next?"}],
            member=fake.member("6001", roles=(ADMIN_ROLE,)), attachments=[att])
        refusal = await fake.wait_for("POST", "/webhooks/", lambda c: "huge.pdf" in c.content)
        assert refusal.json["flags"] & EPHEMERAL and "30.0 MiB" in refusal.content and "25.0 MiB" in refusal.content
        assert await app.jobs.list() == [] and not runs
    finally:
        await stop_bot(app, stop, task)


async def test_each_member_reads_their_language_else_the_servers_unless_the_channel_chose_one(tmp_path, monkeypatch,
                                                                                           fake):
    fake.preferred_locale = "pt-BR"   # the server's language
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        async def jobs_answer(locale: str) -> str:
            before = len(fake.calls_to("POST", "/webhooks/"))
            await fake.interaction("jobs", locale=locale)
            await fake.wait_for("POST", "/webhooks/", lambda c: len(fake.calls_to("POST", "/webhooks/")) > before)
            return fake.calls_to("POST", "/webhooks/")[before].content

        assert await jobs_answer("th") == "ยังไม่มีงาน"
        assert await jobs_answer("en-US") == "No jobs yet."
        assert await jobs_answer("de") == "Nenhuma tarefa ainda."   # no catalog for German: the server's language
        await fake.interaction("settings", [{"name": "key", "type": 3, "value": "language"},
                                            {"name": "value", "type": 3, "value": "th"}],
                               member=fake.member("6002", permissions=EVERYONE_PERMS | MANAGE_GUILD), locale="en-US")
        await fake.wait_for("POST", "/webhooks/", lambda c: "th (ไทย)" in c.content)
        assert await jobs_answer("en-US") == "ยังไม่มีงาน"   # the channel's choice comes first
        await fake.message("!sync", author_id=OWNER)   # the owner's answer: in the channel's language too
        await fake.wait_for("POST", f"/channels/{CHANNEL}/messages", lambda c: "ซิงก์คำสั่ง" in c.content)
    finally:
        await stop_bot(app, stop, task)


async def test_synced_commands_carry_their_descriptions_per_discord_locale(tmp_path, monkeypatch, fake):
    app, stop, task, gate, runs = await start_bot(tmp_path, monkeypatch, fake)
    try:
        await fake.message("!sync", author_id=OWNER)
        sync = await fake.wait_for("PUT", f"/guilds/{GUILD}/commands")
        commands = {c["name"]: c for c in sync.json}
        jobs = commands["jobs"]
        assert jobs["description"] == "Background jobs of this server or chat"
        assert jobs["description_localizations"] == {"pt-BR": "Tarefas em segundo plano deste servidor ou chat",
                                                     "th": "งานเบื้องหลังของเซิร์ฟเวอร์หรือแชตนี้"}
        assert not jobs.get("name_localizations")   # names are typed: they stay English everywhere
        key = next(o for o in commands["settings"]["options"] if o["name"] == "key")
        assert key["description_localizations"]["pt-BR"] != key["description"]
        language = next(c for c in key["choices"] if c["value"] == "language")
        assert language["name_localizations"] == {"pt-BR": "language (idioma)", "th": "language (ภาษา)"}
        menu = commands["Forget this message"]   # a message's Apps menu entry is a label: translated
        assert menu["name_localizations"] == {"pt-BR": "Esquecer esta mensagem", "th": "ลืมข้อความนี้"}
    finally:
        await stop_bot(app, stop, task)


async def test_a_command_while_postgresql_restarts_is_acknowledged_at_once_and_answered_after(
        tmp_path, monkeypatch, fake, restartable_pg):  # noqa: F811
    """A slash command that arrives while the database cannot be reached is deferred within
    Discord's 3 seconds and answered once the database is back, not dropped."""
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True,
                                          db_url=await restartable_pg.fresh_database())
    try:
        await fake.message("the harbour strike starts on Monday at the north gate")
        await wait_for_texts(app, 1)
        restarting = await restartable_pg.going_down(4.0)
        await fake.interaction("recall", [{"name": "query", "type": 3, "value": "harbour strike"}])
        deferred = await fake.wait_for("POST", "/callback")
        assert deferred.json["type"] == 5   # "thinking…"
        await restarting
        await fake.wait_for("POST", "/webhooks/", lambda c: "north gate" in c.content, timeout=30)
    finally:
        await stop_bot(app, stop, task)
