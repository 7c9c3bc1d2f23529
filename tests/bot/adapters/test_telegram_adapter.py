"""The Telegram adapter through the real python-telegram-bot, polling a fake Bot API."""
from __future__ import annotations

import asyncio

import pytest

from tests.helpers.llm_fixtures import sqlite_only
from tests.helpers.telegram import text_of, tg  # noqa: F401  (tg: the Telegram app fixture)
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(60)


async def test_document_with_caption_runs_a_job_with_progress_edits_and_a_report(tg):
    app, server, runs, gate = tg
    server.add_file("doc1", "news.txt", b"The river rose overnight.")
    server.push_message(55, "/testsim what happens next?",
                        document={"file_id": "doc1", "file_name": "news.txt", "file_size": 25})
    started = await server.wait_for("sendMessage", lambda c: "Started" in text_of(c))
    assert "<code>" in text_of(started)  # `id` rendered as HTML code
    await server.wait_for("editMessageText", lambda c: "25%" in text_of(c))
    gate.set()
    await server.wait_for("editMessageText", lambda c: "75%" in text_of(c))
    doc = await server.wait_for("sendDocument")
    assert doc.files["document"][0].startswith("report-")
    assert b"The river rose overnight." in doc.files["document"][1]
    await server.wait_for("sendMessage", lambda c: "finished" in text_of(c))
    assert runs == [{"text": "The river rose overnight.", "requirement": "what happens next?"}]
    # every edit changed the text (Telegram refuses identical edits)
    edits = [text_of(c) for c in server.calls_of("editMessageText")]
    assert all(a != b for a, b in zip(edits, edits[1:]))
    job = (await app.jobs.list(scope="telegram:55"))[0]
    assert job.state == "done" and job.channel == "55"


@sqlite_only
async def test_command_replying_to_a_document(tg):
    app, server, runs, gate = tg
    gate.set()
    server.add_file("doc2", "draft.txt", b"A new tax on bread.")
    original = server.push_message(56, "", document={"file_id": "doc2", "file_name": "draft.txt", "file_size": 19})
    server.push_message(56, "/testsim reactions?", reply_to=original)
    await server.wait_for("sendDocument", lambda c: int(c.params["chat_id"]) == 56)
    assert runs[0]["text"] == "A new tax on bread."


@sqlite_only
async def test_files_over_the_download_limit_are_refused_clearly(tg):
    app, server, runs, gate = tg
    server.push_message(57, "/testsim predict", document={
        "file_id": "big", "file_name": "huge.pdf", "file_size": 25 * 2**20})
    refusal = await server.wait_for("sendMessage", lambda c: "huge.pdf" in text_of(c))
    assert "20.0 MiB" in text_of(refusal) and "25.0 MiB" in text_of(refusal)
    assert not server.calls_of("getFile") and await app.jobs.list() == []


async def test_admin_commands_in_groups_need_a_chat_admin(tg):
    app, server, runs, gate = tg
    server.push_message(-100, "/settings memory off", user_id=8)
    refusal = await server.wait_for("sendMessage", lambda c: "administrator" in text_of(c))
    assert int(refusal.params["chat_id"]) == -100
    assert await app.get_setting("telegram:-100", "-100", "memory") is None
    server.admins.add((-100, 9))
    server.push_message(-100, "/settings memory off", user_id=9)
    await server.wait_for("sendMessage", lambda c: "memory set" in text_of(c))
    assert await app.get_setting("telegram:-100", "-100", "memory") == "off"


@sqlite_only
async def test_a_slow_handler_does_not_block_other_chats_and_text_is_escaped(tg):
    app, server, runs, gate = tg
    release = asyncio.Event()

    @app.commands.command("slow", "waits")
    async def slow(ctx):
        await release.wait()
        await ctx.reply.send("slow done")

    server.push_message(60, "/slow")
    server.push_message(61, "/help nope<b>")
    answer = await server.wait_for("sendMessage", lambda c: "nope" in text_of(c))
    assert "&lt;b&gt;" in text_of(answer) and answer.params["parse_mode"] == "HTML"
    assert not [c for c in server.calls_of("sendMessage") if "slow done" in text_of(c)]
    release.set()
    await server.wait_for("sendMessage", lambda c: "slow done" in text_of(c))


@sqlite_only
async def test_ask_shows_the_typing_indicator_before_the_answer(tg):
    app, server, runs, gate = tg
    server.push_message(55, "/ask where does the ferry leave from?")
    typing = await server.wait_for("sendChatAction")
    assert typing.params["action"] == "typing" and typing.params["chat_id"] == 55
    await server.wait_for("sendMessage", lambda c: c.params.get("chat_id") == 55)
    assert server.calls.index(typing) < next(i for i, c in enumerate(server.calls) if c.method == "sendMessage")


@sqlite_only
async def test_start_greets_and_lists_commands(tg):
    app, server, runs, gate = tg
    server.push_message(62, "/start")
    await server.wait_for("sendMessage", lambda c: "/digest" in text_of(c))
    names = {c["command"] for c in __import__("json").loads(server.calls_of("setMyCommands")[0].params["commands"])
             } if isinstance(server.calls_of("setMyCommands")[0].params["commands"], str) else {
        c["command"] for c in server.calls_of("setMyCommands")[0].params["commands"]}
    assert {"start", "help", "settings", "digest", "testsim"} <= names


async def test_forum_topics_are_their_own_channels(tg):
    app, server, runs, gate = tg
    server.admins.add((-200, 9))
    server.push_message(-200, "/digest on 07:00 UTC", user_id=9, thread_id=77)
    answer = await server.wait_for("sendMessage", lambda c: "Digest on" in text_of(c))
    assert int(answer.params["message_thread_id"]) == 77
    sub, = await app.scheduler.subscriptions("telegram:-200")
    assert sub.channel == "-200:77"
    assert await app.scheduler.post_digest("telegram:-200", "-200:77")
    digest = await server.wait_for("sendMessage", lambda c: "Daily digest" in text_of(c))
    assert int(digest.params["message_thread_id"]) == 77


@sqlite_only
async def test_plain_messages_are_ingested_unless_memory_is_off_for_the_chat(tg):
    app, server, runs, gate = tg
    seen = []

    async def listener(msg):
        seen.append((msg.scope, msg.text))
    app.listeners.insert(0, listener)  # before memory ingestion, which may load a model first
    server.push_message(70, "/settings memory off")
    await server.wait_for("sendMessage", lambda c: "memory set" in text_of(c))
    server.push_message(70, "forget me")
    server.push_message(71, "remember me")
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert seen == [("telegram:71", "remember me")]


@sqlite_only
async def test_a_document_command_without_a_document_explains_how_to_attach(tg):
    app, server, runs, gate = tg
    server.push_message(72, "/testsim what next?")
    hint = await server.wait_for("sendMessage", lambda c: "/testsim needs a document" in text_of(c))
    assert "caption" in text_of(hint) and "reply to the file" in text_of(hint)
    assert await app.jobs.list() == []


@sqlite_only
async def test_other_bots_commands_in_groups_are_ignored(tg):
    app, server, runs, gate = tg
    server.push_message(-300, "/weather Berlin")
    server.push_message(-300, "/help@other_bot")
    server.push_message(70, "/weather")  # in a private chat an unknown command gets an answer
    await server.wait_for("sendMessage", lambda c: "unknown command /weather" in text_of(c))
    server.push_message(-300, "/help@world_bot")
    await server.wait_for("sendMessage", lambda c: int(c.params["chat_id"]) == -300)
    group = [c for c in server.calls_of("sendMessage") if int(c.params["chat_id"]) == -300]
    assert len(group) == 1 and "Commands" in text_of(group[0])


@sqlite_only
async def test_a_failed_download_is_reported(tg):
    app, server, runs, gate = tg
    server.push_message(73, "/testsim predict", document={"file_id": "gone", "file_name": "old.txt", "file_size": 9})
    failure = await server.wait_for("sendMessage", lambda c: "could not download old.txt" in text_of(c))
    assert "invalid file_id" in text_of(failure).lower() and await app.jobs.list() == []


@sqlite_only
async def test_group_admins_are_recognised_for_commands_that_check_one_action(tg):
    app, server, runs, gate = tg
    server.admins.add((-400, 9))
    server.push_message(-400, "/forget all", user_id=8)
    await server.wait_for("sendMessage", lambda c: "only a chat administrator may use /forget all" in text_of(c))
    server.push_message(-400, "/forget all", user_id=9)
    await server.wait_for("sendMessage", lambda c: "/forget confirm" in text_of(c) and "deletes" in text_of(c))


@sqlite_only
async def test_an_animated_gif_is_sent_as_an_animation_and_a_png_as_a_photo(tg, tmp_path):
    from PIL import Image

    app, server, *_ = tg
    frames = [Image.new("RGB", (8, 8), colour) for colour in ("red", "green")]
    frames[0].save(tmp_path / "replay.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    frames[0].save(tmp_path / "chart.png")
    reply = app.reply_to("telegram:55", "55")
    await reply.upload(tmp_path / "replay.gif", caption="Belief replay", image=True)
    await reply.upload(tmp_path / "chart.png", caption="A chart", image=True)
    animation = await server.wait_for("sendAnimation")
    assert animation.files["animation"][1].startswith(b"GIF") and text_of(animation) == "Belief replay"
    photo = await server.wait_for("sendPhoto")
    assert photo.files["photo"][1].startswith(b"\x89PNG")


@sqlite_only
async def test_each_member_is_answered_in_their_app_language_unless_the_chat_chose_one(tg):
    app, server, runs, gate = tg

    def in_chat(chat: int, text: str):
        return lambda c: c.params["chat_id"] == chat and text in text_of(c)

    server.push_message(71, "/jobs", user_id=71, language_code="th")
    await server.wait_for("sendMessage", in_chat(71, "ยังไม่มีงาน"))
    server.push_message(72, "/jobs", user_id=72, language_code="pt-br")
    await server.wait_for("sendMessage", in_chat(72, "Nenhuma tarefa ainda."))
    server.push_message(73, "/jobs", user_id=73, language_code="de")   # no catalog: [bot] language (English)
    await server.wait_for("sendMessage", in_chat(73, "No jobs yet."))
    # in a group, each member reads their own language until an administrator chooses one for the chat
    server.admins.add((-500, 74))
    server.push_message(-500, "/jobs", user_id=74, language_code="th")
    await server.wait_for("sendMessage", in_chat(-500, "ยังไม่มีงาน"))
    server.push_message(-500, "/jobs", user_id=76, language_code="pt-BR")
    await server.wait_for("sendMessage", in_chat(-500, "Nenhuma tarefa ainda."))
    server.push_message(-500, "/settings language pt_BR", user_id=74, language_code="th")
    chosen = await server.wait_for("sendMessage", in_chat(-500, "pt_BR"))
    assert "idioma definido" in text_of(chosen)   # said in the language just chosen
    server.push_message(-500, "/jobs", user_id=75, language_code="th")   # a Thai member now reads Portuguese
    await until(lambda: len([c for c in server.calls_of("sendMessage") if in_chat(-500, "Nenhuma tarefa")(c)]) == 2,
                10, "the second Portuguese answer in the group")
    assert len([c for c in server.calls_of("sendMessage") if in_chat(-500, "ยังไม่มีงาน")(c)]) == 1


@sqlite_only
async def test_the_command_menu_is_set_in_every_language(tg):
    app, server, runs, gate = tg

    def menu(call) -> dict[str, str]:
        commands = call.params["commands"]
        return {c["command"]: c["description"] for c in commands}

    by_language = {call.params.get("language_code"): menu(call) for call in server.calls_of("setMyCommands")}
    assert set(by_language) == {None, "pt", "th"}   # the English menu is the default for every other language
    assert by_language[None]["help"] == "List the commands, or explain one"
    assert by_language["pt"]["help"] == "Lista os comandos, ou explica um deles"
    assert by_language["th"]["help"] == "แสดงรายการคำสั่ง หรืออธิบายคำสั่งหนึ่ง"
    assert by_language["pt"]["start"] == "O que este bot faz" and by_language["th"]["start"] == "บอทนี้ทำอะไรได้บ้าง"
    assert set(by_language["pt"]) == set(by_language["th"]) == set(by_language[None])   # names stay English
