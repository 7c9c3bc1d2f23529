"""Who may do what, through the real discord.py and python-telegram-bot against the local fakes.

One scenario runs on both platforms through a small chat driver in the manner of errbot's
testbot (say something as someone, get the bot's answer back): members act on their own jobs,
simulations and confirmations but not on other people's, administrators on all of them;
remembering, forgetting a channel and digests are the administrators' to switch; any member
may make the bot forget their own messages, and only theirs.
"""
from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass

import pytest

from bot.adapters.base import serve
from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.app import App
from tests.fakes.discord_server import ADMIN_ROLE, CHANNEL, GUILD, FakeDiscord
from tests.fakes.telegram_server import FakeTelegram
from tests.helpers.chat import add_hold_job, make_app
from tests.helpers.llm_fixtures import sqlite_only
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(180)

ALICE, BOB, ROOT = "alice", "bob", "root"  # two members and an administrator
EPHEMERAL = 64
OPTION_TYPES = {"str": 3, "text": 3, "choice": 3, "int": 4, "float": 10, "attachment": 11}


@dataclass
class Answer:
    text: str
    private: bool  # only the asker sees it (Discord's ephemeral messages)


class Chat(abc.ABC):
    """One channel of one platform, driven as its people would."""

    scope: str
    channel: str
    admins: str           # how refusals name administrators on this platform
    ids: dict[str, str]   # person -> platform author id
    private_refusals: bool

    async def say(self, who: str, text: str, document: tuple[str, bytes] | None = None) -> Answer:
        """Send a command as ``who``; the bot's first answer to it."""
        return await self.answer(await self.send(who, text, document))

    @abc.abstractmethod
    async def send(self, who: str, text: str, document: tuple[str, bytes] | None = None) -> object:
        """Send a command as ``who``; returns what ``answer`` needs to find the answer."""

    @abc.abstractmethod
    async def answer(self, sent: object) -> Answer: ...

    @abc.abstractmethod
    async def post(self, who: str, text: str) -> None:
        """A plain chat message."""


class TelegramChat(Chat):
    admins = "a chat administrator"
    private_refusals = False

    def __init__(self, server: FakeTelegram, chat_id: int):
        self.server, self.chat_id = server, chat_id
        self.scope, self.channel = f"telegram:{chat_id}", str(chat_id)
        self.users = {ALICE: 11, BOB: 12, ROOT: 13}
        self.ids = {who: str(uid) for who, uid in self.users.items()}
        server.admins.add((chat_id, self.users[ROOT]))
        self.seen: set[int] = set()

    async def send(self, who, text, document=None):
        doc = None
        if document is not None:
            self.server.add_file(f"f-{document[0]}", document[0], document[1])
            doc = {"file_id": f"f-{document[0]}", "file_name": document[0], "file_size": len(document[1])}
        self.server.push_message(self.chat_id, text, user_id=self.users[who], document=doc)

    async def answer(self, sent):
        call = await self.server.wait_for("sendMessage", lambda c: (
            int(c.params["chat_id"]) == self.chat_id and id(c) not in self.seen
            and not c.params["text"].startswith(("⏳", "✅", "❌"))))  # job progress notes
        self.seen.add(id(call))
        return Answer(call.params["text"], private=False)

    async def post(self, who, text):
        self.server.push_message(self.chat_id, text, user_id=self.users[who])


class DiscordChat(Chat):
    private_refusals = True

    def __init__(self, app: App, server: FakeDiscord):
        self.app, self.server = app, server
        self.scope, self.channel = f"discord:{GUILD}", CHANNEL
        self.admins = f"an administrator (Manage Server or the <@&{ADMIN_ROLE}> role)"
        self.ids = {ALICE: "7001", BOB: "7002", ROOT: "7003"}
        self.members = {ALICE: server.member("7001"), BOB: server.member("7002"),
                        ROOT: server.member("7003", roles=(ADMIN_ROLE,))}

    def options(self, text: str, attachment: dict | None) -> tuple[str, list[dict]]:
        """'/name a b rest…' as the typed options Discord's client would send."""
        name, _, rest = text[1:].partition(" ")
        command = self.app.commands.get(name)
        assert command is not None, name
        tokens, options, flags = rest.split(), [], {}
        for arg in command.args:  # --name value, anywhere
            flag = "--" + arg.name.replace("_", "-")
            if arg.option and flag in tokens[:-1]:
                at = tokens.index(flag)
                flags[arg.name] = int(tokens[at + 1]) if arg.type == "int" else tokens[at + 1]
                del tokens[at:at + 2]
        for arg in command.args:
            if arg.option:
                value = flags.get(arg.name)
            elif arg.type == "attachment":
                value = attachment["id"] if attachment else None
            elif arg.type == "text":
                value, tokens = " ".join(tokens) or None, []
            else:
                value = tokens.pop(0) if tokens else None
            if value is not None:
                options.append({"name": arg.name, "type": OPTION_TYPES[arg.type], "value": value})
        return name, options

    async def send(self, who, text, document=None):
        attachment = self.server.add_attachment(*document) if document else None
        name, options = self.options(text, attachment)
        return await self.server.interaction(name, options, member=self.members[who],
                                             attachments=[attachment] if attachment else [])

    async def answer(self, sent):
        call = await self.server.wait_for("POST", sent["token"], lambda c: "/webhooks/" in c.path or (
            c.path.endswith("/callback") and c.json["type"] == 4))  # a follow-up, or an immediate answer
        body = call.json["data"] if call.path.endswith("/callback") else call.json
        return Answer(body.get("content") or "", private=bool((body.get("flags") or 0) & EPHEMERAL))

    async def post(self, who, text):
        await self.server.message(text, author_id=self.ids[who])


# Both platforms on SQLite; what they store is the same, so PostgreSQL runs Discord's, the quicker
# (suite time), and not the /simulate refusal, which stores nothing.
both_backends_on_discord = pytest.mark.parametrize("chat, db_url", [
    ("discord", "sqlite"), ("discord", "postgresql"), ("telegram", "sqlite")], indirect=True)


@pytest.fixture(params=["discord", "telegram"])
async def chat(request, tmp_path, monkeypatch, db_url):
    if request.param == "discord":
        server = await FakeDiscord().start()
        monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
        app = await make_app(tmp_path, db_url, discord={
            "token_env": "DISCORD_TEST_TOKEN", "api_base": server.api_base, "gateway_url": server.gateway_url,
            "admin_role": ADMIN_ROLE, "message_content": True})
        release = add_hold_job(app)  # before the adapter turns the commands into slash commands
        adapter, driver = DiscordAdapter(app), DiscordChat(app, server)
    else:
        server = await FakeTelegram("123:TEST").start()
        monkeypatch.setenv("TG_TEST_TOKEN", "123:TEST")
        app = await make_app(tmp_path, db_url, telegram={
            "token_env": "TG_TEST_TOKEN", "base_url": server.base_url, "base_file_url": server.base_file_url,
            "poll_timeout_s": 1, "group_max_rate": 1000})  # this group hears more than Telegram's 20 a minute
        release = add_hold_job(app)
        adapter, driver = TelegramAdapter(app), TelegramChat(server, -500)
    app.adapters.add(adapter)
    await app.start()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(adapter, stop))

    async def ready() -> bool:
        return app.reply_to(driver.scope, driver.channel) is not None
    await until(ready, 15, "the adapter to connect")
    yield app, driver
    release.set()
    await app.jobs.shutdown()
    stop.set()
    await asyncio.wait_for(task, 20)
    await app.close()
    await server.stop()


async def state_of(app: App, job_id: str) -> str:
    job = await app.jobs.get(job_id)
    assert job is not None, job_id
    return job.state


@both_backends_on_discord
async def test_members_act_on_their_own_jobs_and_administrators_on_all(chat):
    app, chat = chat
    assert "Holding" in (await chat.say(ALICE, "/hold")).text
    job, = await app.jobs.list(scope=chat.scope, kind="hold")
    assert job.started_by == chat.ids[ALICE]

    refused = await chat.say(BOB, f"/cancel {job.id}")
    assert refused.text == f"⚠ only the person who started this job or {chat.admins} may stop it."
    assert refused.private == chat.private_refusals
    assert await state_of(app, job.id) in ("queued", "running")
    assert f"Cancelled job {job.id}" in (await chat.say(ALICE, f"/cancel {job.id}")).text
    assert await state_of(app, job.id) == "cancelled"
    refused = await chat.say(BOB, f"/resume {job.id}")
    assert refused.text == f"⚠ only the person who started this job or {chat.admins} may resume it."
    assert await state_of(app, job.id) == "cancelled"
    assert "Resuming hold" in (await chat.say(ALICE, f"/resume {job.id}")).text
    assert await state_of(app, job.id) in ("queued", "running")
    assert f"Cancelled job {job.id}" in (await chat.say(ROOT, f"/cancel {job.id}")).text
    assert await state_of(app, job.id) == "cancelled"

    # a simulation belongs to the starter of its job
    await app.db.execute(
        "INSERT INTO simulations(id, scope, channel, job_id, requirement, folder, created_at)"
        " VALUES ('sim1', ?, ?, ?, 'what next?', ?, '2026-01-01')",
        (chat.scope, chat.channel, job.id, str(app.config.data_dir / "sim1")))
    for text, verb in (("/sim stop sim1", "stop it"), ("/sim resume sim1", "resume it"),
                       ("/interview sim1 all why?", "interview its agents"),
                       ("/sim fork sim1 --from-round 1", "fork it"),
                       ("/sim inject sim1 the bridge closes", "inject events into it")):
        refused = await chat.say(BOB, text)
        assert refused.text == f"⚠ only the person who started this simulation or {chat.admins} may {verb}."
    assert await state_of(app, job.id) == "cancelled"
    assert "sim1 is not running" in (await chat.say(ALICE, "/sim stop sim1")).text
    assert "simulation sim1 has no run yet" in (await chat.say(ALICE, "/sim fork sim1 --from-round 1")).text
    assert "has not reached its run yet" in (await chat.say(ALICE, "/interview sim1 all why?")).text
    assert "has not reached its run yet" in (await chat.say(ROOT, "/interview sim1 all why?")).text
    assert "has not prepared its environment yet" in (await chat.say(ALICE, "/sim inject sim1 the bridge closes")).text
    status = (await chat.say(BOB, "/sim status sim1")).text  # anyone may look
    assert "sim1" in status and "what next?" in status and "1. ontology: pending" in status

    # an action waiting for /confirm spends above the threshold: an administrator confirms it, not
    # a member, not even the one who asked for it
    confirmed = []

    async def go_ahead() -> None:
        confirmed.append(True)
    code = app.confirmations.ask(chat.scope, go_ahead)
    for who in (BOB, ALICE):
        refused = await chat.say(who, f"/confirm {code}")
        assert refused.text == f"⚠ only {chat.admins} may confirm it."
    assert confirmed == []
    await chat.send(ROOT, f"/confirm {code}")

    async def went_ahead() -> bool:
        return confirmed == [True]
    await until(went_ahead, 10, "the confirmed action")


@both_backends_on_discord
async def test_channel_memory_and_digests_are_for_administrators_and_anyone_forgets_themselves(chat):
    app, chat = chat
    for text, label in (("/memory off", "/memory"), ("/digest on 07:00 UTC", "/digest on"),
                        ("/digest off", "/digest off"), ("/forget", "/forget"), ("/forget all", "/forget all")):
        refused = await chat.say(BOB, text)
        assert refused.text == f"⚠ only {chat.admins} may use {label}."
        assert refused.private == chat.private_refusals
    assert await app.get_setting(chat.scope, chat.channel, "memory") is None
    assert not await app.scheduler.subscriptions(chat.scope)
    assert "No digest here" in (await chat.say(BOB, "/digest status")).text

    await chat.post(ALICE, "the river is rising near the old mill")
    await chat.post(BOB, "the ferry stops when the river floods")

    async def remembered() -> list[str]:
        rows = await app.db.fetchall("SELECT author_id FROM memory_messages WHERE scope=? ORDER BY id",
                                     (chat.scope,))
        return [r["author_id"] for r in rows]

    async def both() -> bool:
        return len(await remembered()) == 2
    await until(both, 60.0, "both messages to be remembered")
    assert sorted(await remembered()) == sorted([chat.ids[ALICE], chat.ids[BOB]])
    assert "every message of yours" in (await chat.say(BOB, "/forget me")).text
    assert "Forgot your messages here: 1 message," in (await chat.say(BOB, "/forget confirm")).text
    assert await remembered() == [chat.ids[ALICE]]

    assert "no longer remember" in (await chat.say(ROOT, "/memory off")).text
    assert await app.get_setting(chat.scope, chat.channel, "memory") == "off"
    assert "Digest on" in (await chat.say(ROOT, "/digest on 07:00 UTC")).text
    assert "this channel's memory" in (await chat.say(ROOT, "/forget")).text
    assert "Forgot this channel: 1 message," in (await chat.say(ROOT, "/forget confirm")).text
    assert await remembered() == []


@sqlite_only
async def test_a_member_is_refused_simulate_before_any_file_is_looked_at(chat):
    app, chat = chat
    if isinstance(chat, TelegramChat):  # Discord's client cannot send /simulate without its file
        refused = await chat.say(BOB, "/simulate what next?")
        assert refused.text == f"⚠ only {chat.admins} may use /simulate."  # not "needs a document"
    refused = await chat.say(BOB, "/simulate what next?", document=("news.txt", b"The river rose."))
    assert refused.text == f"⚠ only {chat.admins} may use /simulate."
    downloads = app.config.data_dir / "downloads"
    assert not downloads.exists() or not any(downloads.rglob("*news.txt"))
    answer = await chat.say(ROOT, "/simulate what next?", document=("news.txt", b"The river rose."))
    assert "simulations need an LLM" in answer.text  # past the permission check
