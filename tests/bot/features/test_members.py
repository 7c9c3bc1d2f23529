"""What a member asks of memory for themselves, through the real discord.py and python-telegram-bot
against the local fakes: /me, /export me, /forget message (a link, an [M..] id, Discord's message
menu, a Telegram reply) and /forget belief with their permission matrix, /memory off me across
every path into storage (live, Discord backfill, Telegram's replayed inbox, an import), and
/catchup. Answers meant for one member reach only them: Discord's ephemeral follow-ups (deferred
ephemerally, within Discord's 3 seconds), on Telegram their private chat with a note in the group,
or a note saying how to start the bot when it may not write to them."""
from __future__ import annotations

import abc
import argparse
import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import pytest

from bot.adapters.base import serve
from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.cli.memory import import_
from engine.db import open_database
from engine.memory import beliefs as belief_store
from engine.memory.beliefs import NewBelief
from engine.memory.models import utcnow
from tests.fakes.discord_server import ADMIN_ROLE, APP_ID, CHANNEL, GUILD, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Raw, completion
from tests.fakes.telegram_server import BOT_USER, FakeTelegram
from tests.helpers.chat import make_app
from tests.helpers.memory import T0
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)

ALICE, BOB, ROOT = "alice", "bob", "root"   # two members and an administrator
EPHEMERAL = 64
GROUP = -1005000                             # a Telegram supergroup: its links are t.me/c/5000/<id>


@dataclass
class Answer:
    text: str
    private: bool              # only the asker saw it
    files: dict | None = None  # name -> bytes of the files that came with it


class Chat(abc.ABC):
    """One channel of one platform, driven as its people would."""

    app: object
    scope: str
    channel: str
    ids: dict[str, str]
    admins: str

    @abc.abstractmethod
    async def command(self, who: str, text: str, reply_to: dict | None = None) -> object: ...

    @abc.abstractmethod
    async def answer(self, sent: object, files: int = 0) -> Answer:
        """The bot's answer to a command (with ``files`` uploads after it)."""

    @abc.abstractmethod
    async def post(self, who: str, text: str) -> dict: ...

    @abc.abstractmethod
    def link(self, posted: dict) -> str: ...

    async def say(self, who: str, text: str, reply_to: dict | None = None, files: int = 0) -> Answer:
        return await self.answer(await self.command(who, text, reply_to), files)


class DiscordChat(Chat):
    admins = f"an administrator (Manage Server or the <@&{ADMIN_ROLE}> role)"

    def __init__(self, app, server: FakeDiscord):
        self.app, self.server = app, server
        self.scope, self.channel = f"discord:{GUILD}", CHANNEL
        self.ids = {ALICE: "7001", BOB: "7002", ROOT: "7003"}
        self.members = {ALICE: server.member("7001"), BOB: server.member("7002"),
                        ROOT: server.member("7003", roles=(ADMIN_ROLE,))}

    async def command(self, who, text, reply_to=None):
        if text == "/forget message" and reply_to is not None:   # the message's menu: Apps → Forget this message
            return await self.server.message_command("Forget this message", reply_to, member=self.members[who])
        name, _, rest = text[1:].partition(" ")
        command = self.app.commands.get(name)
        tokens, options = rest.split(), []
        for arg in command.args:
            value = (" ".join(tokens) or None) if arg.type == "text" else (tokens.pop(0) if tokens else None)
            tokens = [] if arg.type == "text" else tokens
            if value is not None:
                options.append({"name": arg.name, "type": 3, "value": value})
        return await self.server.interaction(name, options, member=self.members[who])

    async def answer(self, sent, files=0):
        token = sent["token"]
        call = await self.server.wait_for("POST", token, lambda c: "/webhooks/" in c.path or (
            c.path.endswith("/callback") and c.json["type"] == 4))
        body = call.json["data"] if call.path.endswith("/callback") else call.json
        got = dict(call.files.values())
        while len(got) < files:   # each upload is a follow-up of its own
            more = await self.server.wait_for("POST", token, lambda c: "/webhooks/" in c.path and c.files
                                              and not set(dict(c.files.values())) <= set(got))
            got.update(dict(more.files.values()))
        return Answer(body.get("content") or "", bool((body.get("flags") or 0) & EPHEMERAL), got)

    async def post(self, who, text):
        return await self.server.message(text, author_id=self.ids[who])

    def link(self, posted):
        return f"https://discord.com/channels/{GUILD}/{CHANNEL}/{posted['id']}"


class TelegramChat(Chat):
    admins = "a chat administrator"

    def __init__(self, app, server: FakeTelegram):
        self.app, self.server = app, server
        self.scope, self.channel = f"telegram:{GROUP}", str(GROUP)
        self.users = {ALICE: 11, BOB: 12, ROOT: 13}
        self.ids = {who: str(uid) for who, uid in self.users.items()}
        self.languages: dict[str, str] = {}   # a member's app language, as Telegram sends it
        server.admins.add((GROUP, self.users[ROOT]))
        self.seen: set[int] = {id(c) for c in server.calls}   # answers before a restart are not this bot's

    async def command(self, who, text, reply_to=None):
        self.server.push_message(GROUP, text, user_id=self.users[who], reply_to=reply_to,
                                 language_code=self.languages.get(who))
        return who

    async def answer(self, who, files=0):
        """The first answer not seen yet, in the group or in the asker's private chat (with ``files``:
        that many documents, the first one's caption as the text)."""
        mine = {GROUP, self.users[who]}
        method, key = ("sendDocument", "caption") if files else ("sendMessage", "text")
        calls = []
        for _ in range(max(files, 1)):
            call = await self.server.wait_for(method, lambda c: (
                int(c.params["chat_id"]) in mine and id(c) not in self.seen and not c.params[key].startswith("📬")))
            self.seen.add(id(call))
            calls.append(call)
        got = {name: data for c in calls for name, data in c.files.values()}
        return Answer(calls[0].params[key], int(calls[0].params["chat_id"]) == self.users[who], got)

    async def post(self, who, text):
        return self.server.push_message(GROUP, text, user_id=self.users[who])

    def link(self, posted):
        return f"https://t.me/c/{str(GROUP)[4:]}/{posted['message_id']}"


class Bot:
    """A bot process on one of the fakes, which a test may stop and start again on the same data."""

    def __init__(self, platform: str, tmp_path, monkeypatch, db_url, server, **sections):
        self.platform, self.tmp_path, self.db_url, self.server, self.sections = (platform, tmp_path, db_url,
                                                                                   server, sections)
        monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
        monkeypatch.setenv("TG_TEST_TOKEN", "123:TEST")

    async def start(self) -> Chat:
        cfg: dict[str, Any]
        if self.platform == "discord":
            cfg = {"discord": {"token_env": "DISCORD_TEST_TOKEN", "api_base": self.server.api_base,
                               "gateway_url": self.server.gateway_url, "admin_role": ADMIN_ROLE,
                               "message_content": True}}
        else:
            cfg = {"telegram": {"token_env": "TG_TEST_TOKEN", "base_url": self.server.base_url,
                                "base_file_url": self.server.base_file_url, "poll_timeout_s": 1,
                                "group_max_rate": 1000}}
        self.app = app = await make_app(self.tmp_path, self.db_url, **cfg, **self.sections)
        adapter = DiscordAdapter(app) if self.platform == "discord" else TelegramAdapter(app)
        app.adapters.add(adapter)
        await app.start()
        self.stop_event = asyncio.Event()
        self.task = asyncio.create_task(serve(adapter, self.stop_event))
        self.chat = DiscordChat(app, self.server) if self.platform == "discord" else TelegramChat(app, self.server)

        async def ready() -> bool:
            return app.reply_to(self.chat.scope, self.chat.channel) is not None
        await until(ready, 15, "the adapter to connect")
        return self.chat

    async def stop(self) -> None:
        await self.app.jobs.shutdown()
        self.stop_event.set()
        await asyncio.wait_for(self.task, 20)
        await self.app.close()


@pytest.fixture
async def server(request):
    fake = await (FakeDiscord() if request.param == "discord" else FakeTelegram("123:TEST")).start()
    yield fake
    await fake.stop()


def on(*platforms: str, postgresql: bool = False):
    """Run a test on these platforms, on SQLite (and on PostgreSQL for Discord's: the same storage)."""
    cases = [(p, "sqlite") for p in platforms] + ([("discord", "postgresql")] if postgresql else [])
    return pytest.mark.parametrize("server, db_url", cases, indirect=True)


async def stored(app, scope: str) -> list[tuple[str, str]]:
    return [(r["author_id"], r["text"]) for r in await app.db.fetchall(
        "SELECT author_id, text FROM memory_messages WHERE scope=? ORDER BY id", (scope,))]


async def posted(chat: Chat, lines: list[tuple[str, str]]) -> list[dict]:
    """Post plain messages and wait until memory holds them all."""
    before = len(await stored(chat.app, chat.scope))
    out = [await chat.post(who, text) for who, text in lines]

    async def held() -> bool:
        return len(await stored(chat.app, chat.scope)) == before + len(lines)
    await until(held, 60, "the messages to be stored")
    return out


# -- /me, /forget message, /export me ------------------------------------------------------------

@on("discord", "telegram", postgresql=True)
async def test_me_forget_one_message_and_export_answer_only_the_asker(server, db_url, tmp_path, monkeypatch):
    bot = Bot("discord" if isinstance(server, FakeDiscord) else "telegram", tmp_path, monkeypatch, db_url, server)
    chat = await bot.start()
    app = chat.app
    try:
        a1, a2, b1, a3 = await posted(chat, [(ALICE, "the river ferry timetable changes on monday"),
                                             (ALICE, "the ferry to the island runs hourly in summer"),
                                             (BOB, "the sourdough bread needs a hotter oven"),
                                             (ALICE, "my tomatoes need water every evening")])
        mine = await chat.say(ALICE, "/me")
        assert mine.private and "3 messages of yours" in mine.text, mine
        theirs = await chat.say(BOB, "/me")   # nobody sees another's: /me is about the asker, to the asker
        assert theirs.private and "1 message of yours" in theirs.text and "3 messages" not in theirs.text

        refused = await chat.say(BOB, f"/forget message {chat.link(a1)}")
        assert refused.text == f"⚠ only the person who wrote it or {chat.admins} may forget it."
        assert len(await stored(app, chat.scope)) == 4
        prompt = await chat.say(ALICE, f"/forget message {chat.link(a1)}")
        assert prompt.private and "the river ferry timetable changes on monday" in prompt.text
        assert "/forget confirm" in prompt.text
        done = await chat.say(ALICE, "/forget confirm")
        assert done.private and done.text.startswith("Forgot that message: 1 message")
        assert [t for _, t in await stored(app, chat.scope)] == [
            "the ferry to the island runs hourly in summer", "the sourdough bread needs a hotter oven",
            "my tomatoes need water every evening"]

        # an administrator may forget anyone's message, by the [M..] id /recall cites
        bob_row = await app.db.fetchval("SELECT id FROM memory_messages WHERE author_id=?", (chat.ids[BOB],))
        assert "sourdough" in (await chat.say(ROOT, f"/forget message [M{bob_row}]")).text
        assert "Forgot that message" in (await chat.say(ROOT, "/forget confirm")).text
        # the message itself: Discord's message menu, a reply on Telegram; a member's own only
        refused = await chat.say(BOB, "/forget message", reply_to=a2)
        assert "may forget it" in refused.text
        prompt = await chat.say(ALICE, "/forget message", reply_to=a2)
        assert prompt.private and "the ferry to the island" in prompt.text
        assert "Forgot that message" in (await chat.say(ALICE, "/forget confirm")).text
        assert await stored(app, chat.scope) == [(chat.ids[ALICE], "my tomatoes need water every evening")]
        assert "no remembered message here matches" in (await chat.say(ALICE, "/forget message [M99999]")).text

        export = await chat.say(ALICE, "/export me", files=2)
        assert export.private and set(export.files) == {"my-memory.json", "my-memory.md"}
        data = json.loads(export.files["my-memory.json"])
        rows = await app.db.fetchall("SELECT id, text FROM memory_messages WHERE scope=? AND author_id=?",
                                     (chat.scope, chat.ids[ALICE]))
        assert [(m["id"], m["text"]) for m in data["messages"]] == [(r["id"], r["text"]) for r in rows]
        assert b"my tomatoes need water every evening" in export.files["my-memory.md"]

        async def gone() -> bool:   # sent, then deleted
            return not any((app.config.data_dir / "outgoing").rglob("my-memory.*"))
        await until(gone, 10, "the export files to be deleted")
    finally:
        await bot.stop()


@on("telegram")
async def test_me_and_the_export_speak_the_members_language(server, db_url, tmp_path, monkeypatch):
    bot = Bot("telegram", tmp_path, monkeypatch, db_url, server)
    chat = await bot.start()
    chat.languages.update({ALICE: "pt-br", BOB: "th"})
    try:
        await posted(chat, [(ALICE, "a balsa para a ilha sai de hora em hora"), (BOB, "ขนมปังต้องใช้เตาที่ร้อนกว่านี้")])
        mine = await chat.say(ALICE, "/me")
        assert mine.private and "• 1 mensagem de sua autoria, de " in mine.text, mine
        export = await chat.say(ALICE, "/export me", files=2)
        md = export.files["my-memory.md"].decode()
        assert md.startswith("# O que a memória guarda de ") and "## Canal " in md, md
        assert ": 1 mensagem, 0 crença com base nelas." in md and "a balsa para a ilha" in md
        md = (await chat.say(BOB, "/export me", files=2)).files["my-memory.md"].decode()
        assert md.startswith("# สิ่งที่หน่วยความจำเก็บไว้เกี่ยวกับ ") and "## ช่อง " in md, md
        assert "ขนมปังต้องใช้เตาที่ร้อนกว่านี้" in md
    finally:
        await bot.stop()


@on("telegram")
async def test_telegram_says_how_to_start_the_bot_when_it_may_not_write_privately(server, db_url, tmp_path,
                                                                                 monkeypatch):
    bot = Bot("telegram", tmp_path, monkeypatch, db_url, server)
    chat = await bot.start()
    try:
        server.unstarted.add(chat.users[BOB])
        await chat.command(BOB, "/me")
        note = await server.wait_for("sendMessage", lambda c: int(c.params["chat_id"]) == GROUP)
        assert "@world_bot and press Start" in note.params["text"] and "User12" in note.params["text"]
        await chat.say(ALICE, "/me")
        pointer = await server.wait_for("sendMessage", lambda c: c.params["text"].startswith("📬"))
        assert int(pointer.params["chat_id"]) == GROUP and "private chat" in pointer.params["text"]
    finally:
        await bot.stop()


# -- /forget belief ---------------------------------------------------------------------------------

@on("discord", "telegram")
async def test_a_belief_is_forgotten_by_the_author_of_all_its_messages_or_an_administrator(server, db_url, tmp_path,
                                                                                        monkeypatch):
    bot = Bot("discord" if isinstance(server, FakeDiscord) else "telegram", tmp_path, monkeypatch, db_url, server)
    chat = await bot.start()
    app = chat.app
    try:
        await posted(chat, [(ALICE, "the ferry timetable changes on monday"), (BOB, "the ferry also stops on sundays")])
        await app.memory.embedded()   # a belief rests on messages routed to a world
        rows = await app.db.fetchall("SELECT id, world_id, author_id FROM memory_messages ORDER BY id")
        engine = app.memory

        async def belief(obj: str, sources: list[int]) -> int:
            fact = NewBelief("the ferry", "has", obj, 0.9, False, sources, T0)
            async with app.db.transaction() as conn:
                await belief_store.apply(conn, chat.scope, rows[0]["world_id"], [fact],
                                         await engine.embedder.embed([fact.text()]), utcnow())
            return await app.db.fetchval("SELECT max(id) FROM beliefs")
        alices = await belief("a new timetable on monday", [rows[0]["id"]])
        shared = await belief("two changes this week", [rows[0]["id"], rows[1]["id"]])
        assert f"B{alices}" in (await chat.say(ALICE, "/me")).text   # it rests on her message

        refused = await chat.say(BOB, f"/forget belief B{alices}")
        assert refused.text == f"⚠ only the author of every message it rests on or {chat.admins} may forget it."
        prompt = await chat.say(ALICE, f"/forget belief B{alices}")
        assert prompt.private and "a new timetable on monday" in prompt.text
        assert "Forgot that belief: 0 messages, 1 belief" in (await chat.say(ALICE, "/forget confirm")).text
        assert "may forget it" in (await chat.say(ALICE, f"/forget belief {shared}")).text   # Bob's too
        assert "two changes" in (await chat.say(ROOT, f"/forget belief {shared}")).text
        assert "1 belief" in (await chat.say(ROOT, "/forget confirm")).text
        assert await app.db.fetchval("SELECT count(*) FROM beliefs") == 0
        assert await app.db.fetchval("SELECT count(*) FROM memory_messages") == 2   # its messages stay
    finally:
        await bot.stop()


# -- /memory off me on every path into storage -----------------------------------------------------

def update(update_id: int, user_id: int, text: str, message_id: int) -> dict:
    return {"update_id": update_id, "message": {
        "message_id": message_id, "date": int(time.time()), "text": text,
        "chat": {"id": GROUP, "type": "supergroup", "title": "Group"},
        "from": {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}}}


async def run_import(app, tmp_path, scope: str, name: str, lines: list[dict], capsys) -> str:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(line) for line in lines) if name.endswith(".jsonl") else
                    json.dumps(lines[0]), encoding="utf-8")
    code = await import_(argparse.Namespace(file=str(path), scope=scope, format="auto"), app.config)
    assert code == 0
    return capsys.readouterr().out


@on("discord", "telegram", postgresql=True)
async def test_an_opted_out_member_has_none_of_their_messages_stored_by_any_path(server, db_url, tmp_path,
                                                                                monkeypatch, capsys):
    platform = "discord" if isinstance(server, FakeDiscord) else "telegram"
    bot = Bot(platform, tmp_path, monkeypatch, db_url, server)
    chat = await bot.start()
    try:
        await posted(chat, [(ALICE, "said before opting out: the ferry is late")])
        refused = await chat.say(BOB, "/memory off")
        assert refused.text == f"⚠ only {chat.admins} may use /memory."
        off = await chat.say(ALICE, "/memory off me")
        assert off.private and "no longer store your messages" in off.text
        assert "not stored here since" in (await chat.say(ALICE, "/me")).text
        settings = await chat.say(ROOT, "/settings")
        assert "turned memory off for themselves here (/memory off me): 1" in settings.text
        # live
        await chat.post(ALICE, "live: the ferry timetable changes on monday")
        await posted(chat, [(BOB, "live: bob's bread needs a hotter oven")])
        if platform == "discord":   # backfill: said while the bot was away
            await bot.stop()
            server.missed_message("missed: alice's ferry news while the bot was down", author_id=chat.ids[ALICE])
            server.missed_message("missed: bob's bakery news while the bot was down", author_id=chat.ids[BOB])
            chat = await bot.start()
        else:   # the inbox a crash left: updates stored, not yet handled
            await bot.stop()
            db = await open_database(chat.app.config.db_url)
            async with db.transaction() as conn:
                await conn.executemany(
                    "INSERT INTO telegram_inbox(bot_id, update_id, payload, received_at) VALUES (?,?,?,?)",
                    [(BOT_USER["id"], 900 + n, json.dumps(update(900 + n, chat.users[who], text, 9000 + n)),
                      "2026-01-01T00:00:00+00:00") for n, (who, text) in enumerate([
                          (ALICE, "replayed: alice's ferry news from the inbox"),
                          (BOB, "replayed: bob's bakery news from the inbox")])])
            await db.close()
            chat = await bot.start()

        async def bob_back() -> bool:
            return any("bob's bakery news" in t for _, t in await stored(chat.app, chat.scope))
        await until(bob_back, 60, "bob's message read back")
        # an import: by id where the export gives one, else by name
        if platform == "discord":
            exported = {"guild": {"id": GUILD}, "channel": {"id": CHANNEL}, "messages": [
                {"id": "1", "type": "Default", "timestamp": "2025-03-01T12:00:00Z", "content": "imported: alice's",
                 "author": {"id": chat.ids[ALICE], "name": "alice"}},
                {"id": "2", "type": "Default", "timestamp": "2025-03-01T12:01:00Z", "content": "imported: bob's",
                 "author": {"id": chat.ids[BOB], "name": "bob"}}]}
            out = await run_import(chat.app, tmp_path, chat.scope, "export.json", [exported], capsys)
            assert "left out 1 message of members who turned memory off for themselves here (1 by author id)" in out
        name = (await chat.app.db.fetchval("SELECT author_name FROM memory_optouts"))
        out = await run_import(chat.app, tmp_path, chat.scope, "history.jsonl", [
            {"id": "h1", "channel": chat.channel, "author": name.upper(), "ts": "2025-03-01T12:00:00Z",
             "text": "imported without ids: alice's"},
            {"id": "h2", "channel": chat.channel, "author": "someone else", "ts": "2025-03-01T12:01:00Z",
             "text": "imported without ids: someone else's"}], capsys)
        assert "(1 by author name, as the export gives no id for them)" in out
        held = await stored(chat.app, chat.scope)
        assert [t for who, t in held if who == chat.ids[ALICE] or "alice" in t] == [
            "said before opting out: the ferry is late"]   # 0 of hers since she opted out; before stays
        assert "imported without ids: someone else's" in [t for _, t in held]
        on_again = await chat.say(ALICE, "/memory on me")
        assert on_again.private and "again" in on_again.text
        await posted(chat, [(ALICE, "back again: alice's garden news")])
    finally:
        await bot.stop()


# -- /catchup --------------------------------------------------------------------------------------

def catchup_answer(body: dict):
    """A catch-up that takes a second: one point citing the message about Monday."""
    text = body["messages"][0]["content"]
    if "catch a member of a chat up" in text:
        topic = number = 0
        for line in body["messages"][1]["content"].splitlines():
            if line.startswith("Topic "):
                topic = int(line.split()[1].rstrip(":"))
            elif "changes on monday" in line:
                number = int(line[1:line.index("]")])
        answer = {"topics": [{"topic": topic, "points": [{"text": "The ferry timetable changes",
                                                          "sources": [number]}]}]}
        return Raw(200, completion(json.dumps(answer)), delay=1.0)
    return json.dumps({"beliefs": []}) if "extract" in text else json.dumps({"name": "topic"})


@on("discord")
async def test_catchup_is_deferred_privately_at_once_and_cites_the_channel(server, db_url, tmp_path, monkeypatch):
    with FakeOpenAI(catchup_answer) as llm:
        bot = Bot("discord", tmp_path, monkeypatch, db_url, server,
                  llm={"base_url": llm.base_url, "model": "fake-model"}, memory={"extract_every_s": 600})
        chat = await bot.start()
        try:
            await posted(chat, [(BOB, "off for the afternoon"), (ALICE, "the ferry timetable changes on monday"),
                                (ROOT, "we print the new ferry timetable at the harbour")])
            sent = await chat.command(BOB, "/catchup")
            deferred = await server.wait_for("POST", f"/{sent['token']}/callback")
            assert deferred.json["type"] == 5 and deferred.json["data"]["flags"] & EPHEMERAL   # at once, privately
            answer = await chat.answer(sent)
            assert answer.private and f"The ferry timetable changes — user{chat.ids[ALICE]} [M" in answer.text
            assert "2 messages in this channel since your last message here" in answer.text
            followups = [c for c in server.calls if f"/webhooks/{APP_ID}/{sent['token']}" in c.path]
            assert server.calls.index(deferred) < server.calls.index(followups[0])
        finally:
            await bot.stop()


@on("telegram")
async def test_catchup_without_an_llm_shows_central_messages_in_private(server, db_url, tmp_path, monkeypatch):
    bot = Bot("telegram", tmp_path, monkeypatch, db_url, server)
    chat = await bot.start()
    try:
        await posted(chat, [(ALICE, "the ferry timetable changes on monday"),
                            (ROOT, "we print the new ferry timetable at the harbour")])
        answer = await chat.say(BOB, "/catchup 2h")
        assert answer.private and "2 messages in this channel since" in answer.text
        assert "No language model is configured" in answer.text and "[M" in answer.text
        assert "since must look like" in (await chat.say(BOB, "/catchup whenever")).text
    finally:
        await bot.stop()


# -- the console ---------------------------------------------------------------------------------

def console_llm(body: dict):
    """Extraction: one belief per message; a catch-up: its first message as the one point."""
    from engine.memory.extraction import SYSTEM_PROMPT as EXTRACTION
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system.startswith(EXTRACTION[:40]):
        lines = re.findall(r"^\[(\d+)\] (\w+): (.*)$", user, re.M)
        return json.dumps({"beliefs": [{"subject": "the river", "predicate": "is", "object": text.split()[-1],
                                        "confidence": 0.9, "exclusive": False, "sources": [int(n)]}
                                       for n, _, text in lines]})
    if "catch a member of a chat up" in system:
        numbered = re.search(r"^\[(\d+)\]", user, re.M)
        assert numbered is not None, user
        first = int(numbered.group(1))
        return json.dumps({"topics": [{"topic": 1, "points": [{"text": "The river rose", "sources": [first]}]}]})
    return json.dumps({"name": "River"})


def test_the_console_runs_every_member_command(tmp_path):
    from tests.bot.adapters.test_console import run_bot
    with FakeOpenAI(console_llm) as llm:
        config = f'[llm]\nbase_url = "{llm.base_url}"\n[memory]\nextract_every_n = 2\n'
        first = run_bot(tmp_path, "the river is rising near the old mill\nthe ferry stops when the river floods\n",
                        "run", "--wait", config_text=config)
        assert first.returncode == 0, first.stderr[-2000:]
        out = run_bot(tmp_path, "\n".join([
            "/me", "/memory off me", "this line is not stored: memory is off for me", "/me", "/memory on me",
            "/catchup 1d", "/export me", "/forget belief B1", "/forget confirm", "/forget message M1",
            "/forget confirm", "/recall mill", "/me"]) + "\n", config_text=config)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "2 messages of yours" in text and "Beliefs resting on your messages (2)" in text
    assert "Your messages are not stored here since" in text and "I store your messages in this server" in text
    assert "The river rose — " in text and "[M1]" in text   # the catch-up, citing the stored message
    export = next(line for line in text.splitlines() if line.startswith("[file]") and ".json" in line)
    data = json.loads(open(export.split()[1].strip(), encoding="utf-8").read())
    assert [m["text"] for m in data["messages"]] == ["the river is rising near the old mill",
                                                     "the ferry stops when the river floods"]
    assert "This deletes for good [B1] the river — is — mill" in text and "Forgot that belief" in text
    assert "This deletes for good [M1]" in text and "Forgot that message: 1 message" in text
    assert "Memory holds nothing about that." in text
    assert "• 1 message of yours" in text.split("Memory holds nothing about that.")[1]   # the last /me
    # the operator's export of one member, from the command line
    who = data["author_id"]
    exported = run_bot(tmp_path, "", "export", "--scope", "console:local", "--author", who, "--out",
                       str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr[-2000:]
    json_path, md_path = exported.stdout.split()
    assert [m["text"] for m in json.loads(open(json_path, encoding="utf-8").read())["messages"]] == [
        "the ferry stops when the river floods"]
    assert "the ferry stops when the river floods" in open(md_path, encoding="utf-8").read()
    nobody = run_bot(tmp_path, "", "export", "--scope", "console:local", "--author", "nobody-at-all")
    assert nobody.returncode == 2 and nobody.stderr.startswith("error: memory holds no message of nobody-at-all")
