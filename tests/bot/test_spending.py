"""Who may spend on the operator's LLM key, through the real discord.py and python-telegram-bot
against the local fakes, with the fake OpenAI endpoint counting every request.

The bot is public: a stranger who finds it and messages it directly spends nothing, whatever
costly command they type (or whichever report they reply to); an owner's direct message works.
A server or group the operator has not allowed spends at most the guest budget, while an allowed
one spends on; cost-bearing commands are rate-limited per person; simulations queued or running
are capped per scope and per person; and a simulation above the confirmation threshold is never
confirmed by its requester in a direct message.
"""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from bot.adapters.base import serve
from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.features.simulation.access import simulations
from tests.bot.test_permissions import EPHEMERAL, DiscordChat
from tests.engine.sim.report.test_chat import prepare
from tests.fakes.discord_server import CHANNEL, GUILD, FakeDiscord
from tests.fakes.openai_server import completion
from tests.fakes.reportchat_responder import ReportChatResponder
from tests.fakes.telegram_server import BOT_USER, FakeTelegram
from tests.helpers.chat import make_app
from tests.helpers.llm_fixtures import openai_server  # noqa: F401
from tests.helpers.simdata import sample_simulation
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)   # on SQLite: the storage of budgets is tested on both in test_budgets

STRANGER, OWNER = "43", "42"     # user ids, on either platform
GROUP, ALLOWED = -500, -600      # Telegram groups: one the operator never allowed, one it did
ROOT, BOB = 13, 12               # an administrator and a member of both groups
DOCUMENT = ("news.txt", b"The river rose overnight and the ferry stopped at the old mill.")
FERRY = "the ferry leaves at nine from pier four"
NOTHING = "Nothing remembered in this server or chat yet."   # /ask where nothing was said


def responder(tokens: int = 15):
    """The LLM: the report agent for report chat, a topic name for structured requests, else an answer."""
    agent = ReportChatResponder()

    def answer(body: dict):
        if (body["messages"][0].get("content") or "").startswith("You are the report agent"):
            return agent(body)
        if body.get("response_format"):
            return completion(json.dumps({"name": "Ferry times"}), prompt_tokens=tokens)
        return completion("The ferry leaves at nine [M1].", prompt_tokens=tokens - 5)
    return answer


class Bot:
    """One platform's bot, with a direct-message driver (``dm``, ``dm_reply``) and, on Telegram, a
    group driver (``group``); ``answer`` is the bot's next answer in that chat."""

    platform: str

    def __init__(self, app):
        self.app = app

    def scope_of_dm(self, who: str) -> str:
        return f"telegram:{who}" if self.platform == "telegram" else f"discord:dm-{who}"


class TelegramBot(Bot):
    platform = "telegram"

    def __init__(self, app, server: FakeTelegram):
        super().__init__(app)
        self.server = server
        server.admins.update({(GROUP, ROOT), (ALLOWED, ROOT)})
        self.seen: set[int] = set()

    def channel_of_dm(self, who: str) -> str:
        return who

    async def answer_in(self, chat: int) -> str:
        call = await self.server.wait_for("sendMessage", lambda c: (
            int(c.params["chat_id"]) == chat and id(c) not in self.seen
            and not c.params["text"].startswith(("⏳", "✅", "❌"))), timeout=30)
        self.seen.add(id(call))
        return call.params["text"]

    def _document(self, document):
        if document is None:
            return None
        self.server.add_file(f"f-{document[0]}", document[0], document[1])
        return {"file_id": f"f-{document[0]}", "file_name": document[0], "file_size": len(document[1])}

    async def dm(self, who: str, text: str, document=None) -> str:
        self.server.push_message(int(who), text, user_id=int(who), document=self._document(document))
        return await self.answer_in(int(who))

    async def post_dm(self, who: str, text: str) -> None:
        self.server.push_message(int(who), text, user_id=int(who))

    async def dm_reply(self, who: str, text: str, message_id: str) -> str:
        replied = {"message_id": int(message_id), "date": int(time.time()), "from": BOT_USER,
                   "chat": {"id": int(who), "type": "private", "first_name": "Ann"}, "text": "📊 Report"}
        self.server.push_message(int(who), text, user_id=int(who), reply_to=replied)
        return await self.answer_in(int(who))

    async def group(self, chat: int, who: int, text: str, document=None) -> str:
        self.server.push_message(chat, text, user_id=who, document=self._document(document))
        return await self.answer_in(chat)


class DiscordBot(Bot):
    platform = "discord"

    def __init__(self, app, server: FakeDiscord):
        super().__init__(app)
        self.server = server
        self.typed = DiscordChat(app, server)   # how Discord's client types a command's options

    def channel_of_dm(self, who: str) -> str:
        return self.server.dm_channel(who)

    async def dm(self, who: str, text: str, document=None) -> str:
        attachment = self.server.add_attachment(*document) if document else None
        name, options = self.typed.options(text, attachment)
        sent = await self.server.interaction(name, options, dm=who, attachments=[attachment] if attachment else [])
        call = await self.server.wait_for("POST", sent["token"], lambda c: "/webhooks/" in c.path or (
            c.path.endswith("/callback") and c.json["type"] == 4))
        body = call.json["data"] if call.path.endswith("/callback") else call.json
        if body.get("content", "").startswith("⚠"):
            assert (body.get("flags") or 0) & EPHEMERAL   # a refusal only they see
        return body.get("content") or ""

    async def post_dm(self, who: str, text: str) -> None:
        await self.server.dm_message(text, who)

    async def dm_reply(self, who: str, text: str, message_id: str) -> str:
        channel = self.server.dm_channel(who)
        before = len(self.server.calls_to("POST", f"/channels/{channel}/messages"))
        await self.server.dm_message(text, who, reply_to=message_id)
        await self.server.wait_for("POST", f"/channels/{channel}/messages", lambda c: len(
            self.server.calls_to("POST", f"/channels/{channel}/messages")) > before)
        return self.server.calls_to("POST", f"/channels/{channel}/messages")[before].content


async def start(platform: str, tmp_path, monkeypatch, server_llm, **sections):
    """The bot of ``platform`` with every feature and the fake LLM; returns (bot, stop)."""
    llm = {"base_url": server_llm.base_url, "model": "m", "retry_max_wait_s": 0.1, **sections.pop("llm", {})}
    bot_section = {"owner_ids": [f"{platform}:{OWNER}"], **sections.pop("bot", {})}
    memory = {"topic_delay_s": 0.0, **sections.pop("memory", {})}   # topics are named at once, where allowed
    fake: FakeDiscord | FakeTelegram
    adapter: DiscordAdapter | TelegramAdapter
    bot: DiscordBot | TelegramBot
    if platform == "discord":
        fake = await FakeDiscord().start()
        monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
        app = await make_app(tmp_path, llm=llm, bot=bot_section, memory=memory, discord={
            "token_env": "DISCORD_TEST_TOKEN", "api_base": fake.api_base, "gateway_url": fake.gateway_url,
            "message_content": True}, **sections)
        adapter, bot = DiscordAdapter(app), DiscordBot(app, fake)
    else:
        fake = await FakeTelegram("123:TEST").start()
        monkeypatch.setenv("TG_TEST_TOKEN", "123:TEST")
        app = await make_app(tmp_path, llm=llm, bot=bot_section, memory=memory, telegram={
            "token_env": "TG_TEST_TOKEN", "base_url": fake.base_url, "base_file_url": fake.base_file_url,
            "poll_timeout_s": 1, "group_max_rate": 1000}, **sections)
        adapter, bot = TelegramAdapter(app), TelegramBot(app, fake)
    app.adapters.add(adapter)
    await app.start()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(adapter, stop))

    async def ready() -> bool:
        return app.reply_to(f"discord:{GUILD}" if platform == "discord" else f"telegram:{GROUP}",
                            CHANNEL if platform == "discord" else str(GROUP)) is not None
    await until(ready, 20, "the adapter to connect")

    async def close() -> None:
        await app.jobs.shutdown()
        stop.set()
        await asyncio.wait_for(task, 20)
        await app.close()
        await fake.stop()
    return bot, close


def refused_in_dm(label: str) -> str:
    return (f"⚠ in a direct message only the bot's owners may use {label}: it spends on the operator's LLM key. "
            "Use it in a server or group the bot is in.")


@pytest.mark.parametrize("platform", ["discord", "telegram"])
async def test_a_strangers_direct_message_spends_nothing_and_an_owners_works(platform, tmp_path, tmp_path_factory,
                                                                           monkeypatch, openai_server):  # noqa: F811
    openai_server.responder = responder()
    bot, close = await start(platform, tmp_path, monkeypatch, openai_server,
                             simulation={"confirm_above_usd": 0, "confirm_above_tokens": 0})
    app = bot.app
    try:
        scope, channel = bot.scope_of_dm(STRANGER), bot.channel_of_dm(STRANGER)
        # what a stranger could spend on: memory to ask about, a simulation of theirs with its report,
        # a report message to reply to, and an action waiting for /confirm that would call the LLM
        for text in (FERRY, "the ferry to the island is late on sundays", "the ferry fare went up again"):
            await bot.post_dm(STRANGER, text)   # enough for its world to be named (by the LLM, where it may)
        await prepare(app, sample_simulation(tmp_path_factory, tmp_path), scope, channel, starter=STRANGER)
        await simulations(app).note_report_messages("sim1", scope, channel, ["777"])

        async def spend() -> None:
            await app.llm.chat([{"role": "user", "content": "hi"}], scope="console:local")
        code = app.confirmations.ask(scope, spend)

        for text, label in (("/ask when does the ferry leave?", "/ask"),
                            ("/report sim1 ask How did commuters react?", "/report ask"),
                            ("/interview sim1 all Will you take the bus?", "/interview"),
                            ("/sim fork sim1 --from-round 1", "/sim fork"),
                            ("/compare sim1 sim2", "/compare")):
            assert await bot.dm(STRANGER, text) == refused_in_dm(label), text
        assert await bot.dm(STRANGER, "/simulate what happens next?", DOCUMENT) == refused_in_dm("/simulate")
        assert await bot.dm(STRANGER, f"/confirm {code}") == (
            "⚠ in a direct message only the bot's owners may confirm it: it spends above the confirmation threshold.")
        assert await bot.dm_reply(STRANGER, "How did commuters react?", "777") == refused_in_dm("/report ask")
        assert not list((app.config.data_dir / "downloads").rglob("*news.txt"))
        await app.settled()
        assert openai_server.requests == []
        assert await app.db.fetchval("SELECT count(*) FROM llm_usage") == 0
        # remembered all the same: the three messages and the reply
        assert await app.db.fetchval("SELECT count(*) FROM memory_messages WHERE scope = ?", (scope,)) == 4

        # the owner's own direct message spends as the operator asks
        await bot.post_dm(OWNER, FERRY)
        await until(lambda: app.db.fetchval("SELECT count(*) FROM memory_messages WHERE scope = ?",
                                            (bot.scope_of_dm(OWNER),)), 30, "the owner's message stored")
        answer = await bot.dm(OWNER, "/ask when does the ferry leave?")
        assert answer.startswith("The ferry leaves at nine [M1].")
        assert await app.db.fetchval("SELECT sum(calls) FROM llm_usage WHERE scope = ? AND spender = ?",
                                     (bot.scope_of_dm(OWNER), f"{platform}:{OWNER}")) >= 1
    finally:
        await close()


async def test_a_group_the_operator_did_not_allow_spends_only_the_guest_budget(tmp_path, monkeypatch,
                                                                               openai_server):  # noqa: F811
    openai_server.responder = responder(tokens=1000)
    bot, close = await start("telegram", tmp_path, monkeypatch, openai_server,
                             bot={"allowed_scopes": [f"telegram:{ALLOWED}"]},
                             llm={"guest_budget_tokens_per_day": 2500, "guest_budget_usd_per_day": 0.0})
    try:
        for chat in (GROUP, ALLOWED):
            bot.server.push_message(chat, FERRY, user_id=BOB)
        for _ in range(3):   # the stranger's group: its administrator's questions, 1,000 tokens each
            assert (await bot.group(GROUP, ROOT, "/ask when does the ferry leave?")).startswith("The ferry leaves")
        spent = len(bot.server.calls_of("sendMessage"))
        asked = len(openai_server.requests)
        refused = await bot.group(GROUP, ROOT, "/ask when does the ferry leave?")
        assert refused.startswith("⚠ this server or chat reached today's LLM budget (3,000 of 2,500 tokens); it "
                                  "resets at midnight UTC (in ")
        assert "or the bot's operator adds it to [bot] allowed_scopes" in refused
        refused = await bot.group(GROUP, ROOT, "/simulate what happens next?", DOCUMENT)
        assert refused.startswith("⚠ this simulation cannot start: that needs about ")
        assert "this server or chat may spend only 0 tokens more today ([llm] guest_budget_tokens_per_day is " \
               "2,500 tokens)" in refused
        assert len(openai_server.requests) == asked and len(bot.server.calls_of("sendMessage")) == spent + 2
        # the group the operator allowed spends on
        for _ in range(4):
            assert (await bot.group(ALLOWED, ROOT, "/ask when does the ferry leave?")).startswith("The ferry leaves")
        assert await bot.app.db.fetchval("SELECT sum(prompt_tokens + completion_tokens) FROM llm_usage WHERE "
                                         "scope = ?", (f"telegram:{GROUP}",)) == 3000
    finally:
        await close()


async def test_costly_commands_are_limited_per_person_and_hour_but_not_for_owners(tmp_path, monkeypatch,
                                                                                 openai_server):  # noqa: F811
    openai_server.responder = responder()
    bot, close = await start("telegram", tmp_path, monkeypatch, openai_server, bot={"costly_per_hour": 2})
    try:
        for _ in range(2):
            assert NOTHING == await bot.group(GROUP, BOB, "/ask who won the match?")
        assert await bot.group(GROUP, BOB, "/report sim9 ask why?") == (
            "⚠ you have used 2 commands that spend on the LLM in the last hour, the most one person may ([bot] "
            "costly_per_hour; the bot's owners have no limit); /report ask is allowed again in 60 min.")
        assert NOTHING == await bot.group(GROUP, ROOT, "/ask who won the match?")   # someone else
        for _ in range(3):
            assert NOTHING == await bot.group(GROUP, int(OWNER), "/ask who won the match?")
        assert NOTHING != await bot.group(GROUP, BOB, "/ask who won the match?")
    finally:
        await close()


async def test_simulations_queued_or_running_are_capped_per_person_and_per_group(tmp_path, monkeypatch,
                                                                                 openai_server):  # noqa: F811
    openai_server.responder = responder()
    bot, close = await start("telegram", tmp_path, monkeypatch, openai_server,
                             simulation={"max_active_per_user": 1, "max_active_per_scope": 2})
    bot.server.admins.add((GROUP, 14))
    app = bot.app
    try:
        async def running(who: int) -> None:   # a simulation of ``who``'s, as its job is while it runs
            n = await app.db.fetchval("SELECT count(*) FROM jobs")
            await app.db.execute(
                "INSERT INTO jobs(id, kind, scope, channel, title, params, state, message, created_at, updated_at,"
                " started_by) VALUES (?, 'simulation', ?, ?, 'simulation', '{}', 'running', '', ?, ?, ?)",
                (f"j{n}", f"telegram:{GROUP}", str(GROUP), "2026-01-01", "2026-01-01", str(who)))
        await running(ROOT)
        assert await bot.group(GROUP, ROOT, "/simulate what happens next?", DOCUMENT) == (
            "⚠ you already have 1 simulation queued or running, the most one person may ([simulation] "
            "max_active_per_user); wait for one to finish, or /cancel one (/jobs lists them).")
        await running(BOB)
        assert (await bot.group(GROUP, 14, "/simulate what happens next?", DOCUMENT)).startswith(
            "⚠ this server or chat already has 2 simulations queued or running, the most it may ([simulation] "
            "max_active_per_scope)")
        assert openai_server.requests == [] and await app.db.fetchval("SELECT count(*) FROM jobs") == 2
    finally:
        await close()


@pytest.mark.parametrize("platform", ["discord", "telegram"])
async def test_above_the_threshold_the_requester_in_a_direct_message_cannot_confirm(platform, tmp_path, monkeypatch,
                                                                                    openai_server):  # noqa: F811
    """With every person the administrator of their own direct message, a stranger may start a small
    simulation there (within the guest budget), but not confirm one above the threshold."""
    openai_server.responder = responder()
    bot, close = await start(platform, tmp_path, monkeypatch, openai_server, bot={"dm_admins": "everyone"},
                             llm={"guest_budget_tokens_per_day": 10_000_000},
                             simulation={"confirm_above_usd": 0, "confirm_above_tokens": 1})
    try:
        asked = await bot.dm(STRANGER, "/simulate what happens next?", DOCUMENT)
        assert "Type /confirm " in asked and "an administrator of this server or group, or one of the bot's " \
                                            "owners, may" in asked
        code = asked.split("/confirm ", 1)[1].split()[0]
        assert await bot.dm(STRANGER, f"/confirm {code}") == (
            "⚠ in a direct message only the bot's owners may confirm it: it spends above the confirmation threshold.")
        assert openai_server.requests == [] and await bot.app.jobs.list() == []
    finally:
        await close()
