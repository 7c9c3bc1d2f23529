"""Channel privacy inside a Discord server, through the real discord.py against the fake Discord.

#general is public; #private is one @everyone cannot view (only the staff role can). What is
said in #private must never come back in #general: not by /recall, /ask (the fake LLM echoes
every context it is given into its answer, so a leaked source would show), /worlds topics,
/world or the digest. #private itself sees its own memory and #general's. A channel made
private later (CHANNEL_UPDATE) stops showing in #general at once, and shows again when opened up.
"""
from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from bot.adapters import discord_adapter
from bot.adapters.base import serve
from engine.memory import MemoryMessage
from engine.memory.extraction import SYSTEM_PROMPT
from tests.fakes.discord_server import (
    ADMIN_ROLE,
    APP_ID,
    CHANNEL,
    EVERYONE_PERMS,
    GUILD,
    STAFF_ROLE,
    VIEW_CHANNEL,
    FakeDiscord,
    overwrite,
    private_to,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.chat import add_test_simulation, make_app
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(240)
SCOPE = f"discord:{GUILD}"

PUBLIC = [
    "how do I read a csv file with pandas", "pandas groupby is slow on big frames",
    "my sourdough bread did not rise", "the oven needs to be hotter for the bread",
    "the striker scored twice last night", "our defence was terrible in the second half",
    "flights to lisbon are cheap in march", "the hotel near the station in lisbon was noisy",
]
PRIVATE = [
    "the biopsy results from the oncologist came back on tuesday",
    "my chemotherapy appointment at the clinic moved to friday",
    "the oncologist wants another scan of the tumour next month",
    "the clinic said the biopsy sample was too small",
    "my salary review with payroll is on monday",
    "payroll forgot my overtime bonus again this month",
    "the severance package for the layoffs is confidential",
    "the layoffs will hit the warehouse team first",
]
SECRET_WORDS = {"biopsy", "oncologist", "chemotherapy", "clinic", "tumour", "salary", "payroll", "overtime",
                "severance", "layoffs", "warehouse", "scan", "appointment", "sample"}
PROBE_QUERIES = [
    "biopsy results", "what did the oncologist say", "when is the chemotherapy appointment",
    "salary review", "who gets the severance package", "layoffs at the warehouse", "payroll overtime bonus",
    "tumour scan next month", "pandas csv", "sourdough bread", "the striker", "cheap flights to lisbon",
]


def responder(body: dict):
    """Extraction: one belief per message ('<author> said <text>'); topic names: the distinctive words
    given; answers: the whole context given, so anything the bot shows the model shows up."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system.startswith(SYSTEM_PROMPT):
        lines = re.findall(r"^\[(\d+)\] (\w+): (.*)$", user, re.M)
        return json.dumps({"beliefs": [{"subject": author, "predicate": "said", "object": text, "confidence": 0.9,
                                        "exclusive": False, "sources": [int(n)]} for n, author, text in lines]})
    if "name chat topics" in system:
        words = re.search(r"Distinctive words: (.*)", user)
        return json.dumps({"name": words.group(1) if words else "topic"})
    return "ECHO " + user.split("\n\nQuestion:")[0]


@pytest.fixture
def llm_server():
    with FakeOpenAI(responder) as server:
        yield server


@pytest.fixture
async def fake():
    server = FakeDiscord()
    server.private = server.add_channel("private", private_to(STAFF_ROLE))
    server.later = server.add_channel("later")
    await server.start()
    yield server
    await server.stop()


async def start_bot(tmp_path, monkeypatch, server, llm_server, before_connect=None, db_url=None):
    """The bot on the fake, on conftest's ``db_url`` (both backends) or SQLite: the 40 random probes
    stay on SQLite (suite time); the channel made private runs the same queries on both."""
    monkeypatch.setenv("DISCORD_TEST_TOKEN", "fake-token")
    app = await make_app(tmp_path, db_url,
                         discord={"token_env": "DISCORD_TEST_TOKEN", "api_base": server.api_base,
                                  "gateway_url": server.gateway_url, "message_content": True,
                                  "admin_role": ADMIN_ROLE},
                         llm={"base_url": llm_server.base_url, "model": "fake-model", "max_retries": 0},
                         memory={"extract_every_n": 1000, "extract_every_s": 600})
    add_test_simulation(app)
    await app.start()
    if before_connect is not None:
        await before_connect(app)
    stop = asyncio.Event()
    adapter = app.adapters.add(discord_adapter.DiscordAdapter(app))
    task = asyncio.create_task(serve(adapter, stop))
    await asyncio.wait_for(server.identified.wait(), 10)
    await until(lambda: app.reply_to(f"discord:{GUILD}", CHANNEL) is not None, 30)
    return app, stop, task


async def stop_bot(app, stop, task):
    stop.set()
    await asyncio.wait_for(task, 15)
    await app.close()


def commands_running() -> bool:
    return any(t.get_name() == "CommandTree-invoker" and not t.done() for t in asyncio.all_tasks())


async def command(fake: FakeDiscord, slash: str, channel: str, /, **options: str) -> str:
    """Run a slash command in ``channel``; everything the bot answered (follow-ups and errors)."""
    payload = await fake.interaction(slash, [{"name": k, "type": 3, "value": v} for k, v in options.items()],
                                     member=fake.member("6001", roles=(STAFF_ROLE,)), channel=channel)
    await fake.wait_for("POST", f"/{payload['token']}/callback")  # deferred: its command task is running
    await until(lambda: not commands_running(), 30)
    path = f"/webhooks/{APP_ID}/{payload['token']}"
    return "\n".join(c.content for c in fake.calls_to("POST", path))


async def digest_in(fake: FakeDiscord, channel: str) -> str:
    before = len(fake.calls_to("POST", f"/channels/{channel}/messages"))
    await command(fake, "digest", channel, action="now")
    posts = fake.calls_to("POST", f"/channels/{channel}/messages")[before:]
    return "\n".join(c.content for c in posts if "Daily digest" in c.content)


async def say_all(app, fake: FakeDiscord, lines: list[tuple[str, str]]) -> None:
    """Post plain messages (channel, text) and wait until memory holds them all."""
    held = await app.db.fetchval("SELECT count(*) FROM memory_messages")
    for channel, text in lines:
        await fake.message(text, author_id="6001", channel=channel)

    async def all_held() -> bool:
        return await app.db.fetchval("SELECT count(*) FROM memory_messages") == held + len(lines)
    await until(all_held, 30)
    await app.memory.flush()


async def private_traces(app, channel: str) -> tuple[set[str], set[str]]:
    """The ids of the worlds holding ``channel``'s messages, and those messages' ids."""
    rows = await app.db.fetchall("SELECT id, world_id FROM memory_messages WHERE channel=?", (channel,))
    return {r["world_id"] for r in rows}, {str(r["id"]) for r in rows}


def leaks(text: str, asked: str, worlds: set[str], messages: set[str]) -> list[str]:
    """What of the private channel shows in ``text`` (words the probe itself named aside)."""
    words = set(re.findall(r"[a-z]+", text.lower())) - set(re.findall(r"[a-z]+", asked.lower()))
    found = sorted(words & SECRET_WORDS)
    found += [w for w in worlds if w in text]
    found += [f"M{m}" for m in messages if re.search(rf"\[M{m}\]", text)]
    found += [line for line in PRIVATE if line in text and line not in asked]
    return found


async def test_a_private_channel_never_shows_in_general_but_does_in_itself(tmp_path, monkeypatch, fake, llm_server):
    rng = random.Random(20251201)
    app, stop, task = await start_bot(tmp_path, monkeypatch, fake, llm_server)
    try:
        lines = [(CHANNEL, t) for t in PUBLIC] + [(fake.private, t) for t in PRIVATE]
        rng.shuffle(lines)
        await say_all(app, fake, lines)
        worlds, messages = await private_traces(app, fake.private)
        public_worlds, _ = await private_traces(app, CHANNEL)
        assert worlds and not worlds & public_worlds  # never a shared world
        private_topics = [r["topic"] for r in await app.db.fetchall(
            f"SELECT topic FROM worlds WHERE id IN ({','.join('?' * len(worlds))})", sorted(worlds))]
        assert any(w in " ".join(private_topics).lower() for w in SECRET_WORDS)

        probes, found = 0, []
        for _ in range(40):
            kind = rng.choice(["recall", "ask", "worlds", "world", "world-id"])
            query = rng.choice(PROBE_QUERIES)
            if kind == "recall":
                text = await command(fake, "recall", CHANNEL, query=query)
            elif kind == "ask":
                text = await command(fake, "ask", CHANNEL, question=query)
            elif kind == "worlds":
                query, text = "", await command(fake, "worlds", CHANNEL)
            elif kind == "world":
                query = rng.choice(sorted(SECRET_WORDS) + private_topics)
                text = await command(fake, "world", CHANNEL, name=query)
                assert "no world matches" in text, text
            else:
                wid = rng.choice(sorted(worlds))
                text = await command(fake, "world", CHANNEL, name=wid)
                assert "no world matches" in text, text
                query, text = "", text.replace(repr(wid), "")  # the refusal repeats the id it was asked for
            probes += 1
            found += [(kind, query, leak) for leak in leaks(text, query, worlds, messages)]
        for _ in range(3):
            probes += 1
            found += [("digest", "", leak) for leak in leaks(await digest_in(fake, CHANNEL), "", worlds, messages)]
        assert found == [], f"{len(found)} leaks in {probes} probes: {found[:10]}"

        # In #private: its own memory, and #general's public memory too.
        own = await command(fake, "recall", fake.private, query="what did the oncologist say about the biopsy")
        assert "oncologist" in own and any(m in own for m in (f"[M{i}]" for i in messages))
        shared = await command(fake, "recall", fake.private, query="pandas csv file")
        assert "pandas" in shared
        answer = await command(fake, "ask", fake.private, question="when is the chemotherapy appointment")
        assert "chemotherapy" in answer.split("Sources:")[0]
        listing = await command(fake, "worlds", fake.private)
        assert sum(1 for w in worlds | public_worlds if w in listing) == len(worlds | public_worlds)
        own_digest = (await digest_in(fake, fake.private)).lower()
        assert any(w in own_digest for w in SECRET_WORDS) and "pandas" in own_digest
    finally:
        await stop_bot(app, stop, task)


async def test_a_channel_made_private_leaves_general_at_once_and_returns_when_opened(
        tmp_path, monkeypatch, fake, llm_server, db_url):
    app, stop, task = await start_bot(tmp_path, monkeypatch, fake, llm_server, db_url=db_url)
    try:
        await say_all(app, fake, [(CHANNEL, t) for t in PUBLIC[:4]] + [(fake.later, t) for t in PRIVATE[:4]])
        before = await command(fake, "recall", CHANNEL, query="biopsy results from the oncologist")
        assert "oncologist came back" in before  # still public: #general sees it

        await fake.update_channel(fake.later, private_to(STAFF_ROLE))
        await until(lambda: app.db.fetchval("SELECT count(*) FROM channel_audiences WHERE channel=? AND audience=?",
                                            (fake.later, fake.later)), 30)
        worlds, messages = await private_traces(app, fake.later)
        for name, option, query in [("recall", "query", "biopsy results from the oncologist"),
                                    ("ask", "question", "what about the chemotherapy clinic"),
                                    ("worlds", None, "")]:
            text = await command(fake, name, CHANNEL, **({option: query} if option else {}))
            assert leaks(text, query, worlds, messages) == [], (name, text)
        assert leaks(await digest_in(fake, CHANNEL), "", worlds, messages) == []
        inside = await command(fake, "recall", fake.later, query="biopsy results from the oncologist")
        assert "oncologist came back" in inside

        await fake.update_channel(fake.later, [])
        await until(lambda: app.db.fetchval("SELECT count(*) FROM channel_audiences WHERE channel=? AND audience=''",
                                            (fake.later,)), 30)
        again = await command(fake, "recall", CHANNEL, query="biopsy results from the oncologist")
        assert "oncologist came back" in again
    finally:
        await stop_bot(app, stop, task)


async def test_what_was_remembered_before_a_channel_became_private_moves_when_the_bot_connects(
        tmp_path, monkeypatch, fake, llm_server, db_url):
    async def remembered_while_public(app):  # e.g. by a version of the bot that knew no audiences
        memory = app.memory
        for n, text in enumerate(PRIVATE[:4]):
            await memory.ingest(MemoryMessage(SCOPE, fake.private, f"old-{n}", "user6001", text))

    app, stop, task = await start_bot(tmp_path, monkeypatch, fake, llm_server, remembered_while_public, db_url)
    try:
        await until(lambda: app.db.fetchval("SELECT count(*) FROM channel_audiences WHERE channel=? AND audience=?",
                                            (fake.private, fake.private)), 30)
        worlds, messages = await private_traces(app, fake.private)
        text = await command(fake, "recall", CHANNEL, query="biopsy results from the oncologist")
        assert "Nothing remembered" in text
        assert leaks(text, "biopsy results from the oncologist", worlds, messages) == []
        assert "oncologist came back" in await command(fake, "recall", fake.private, query="biopsy oncologist")
    finally:
        await stop_bot(app, stop, task)


async def test_the_audience_of_each_kind_of_channel_and_a_server_wide_role_change(tmp_path, monkeypatch, llm_server,
                                                                                   db_url):
    fake = FakeDiscord()
    private = fake.add_channel("private", private_to(STAFF_ROLE))
    kinds = {
        CHANNEL: "",                                                           # everyone reads it
        private: private,                                                      # @everyone denied
        fake.add_channel("staff-allowed", [overwrite(STAFF_ROLE, allow=VIEW_CHANNEL)]): "",  # allows add, deny none
        (minus_role := fake.add_channel("no-staff", [overwrite(STAFF_ROLE, deny=VIEW_CHANNEL)])): minus_role,
        (minus_one := fake.add_channel("not-bob", [overwrite("6002", deny=VIEW_CHANNEL, member=True)])): minus_one,
        fake.add_thread(CHANNEL, "public thread"): "",                        # reads like its parent
        fake.add_thread(private, "thread in private"): private,
        (secret := fake.add_thread(CHANNEL, "private thread", private=True)): secret,
    }
    await fake.start()
    app, stop, task = await start_bot(tmp_path, monkeypatch, fake, llm_server, db_url=db_url)
    try:
        async def recorded() -> dict[str, str]:
            rows = await app.db.fetchall("SELECT channel, audience FROM channel_audiences WHERE scope=?", (SCOPE,))
            return {r["channel"]: r["audience"] for r in rows}

        async def all_recorded() -> bool:
            return len(await recorded()) == len(kinds)
        await until(all_recorded, 30)
        assert await recorded() == kinds

        # @everyone loses View Channel server-wide: no channel is readable by every member any more.
        await fake.update_role(GUILD, EVERYONE_PERMS & ~VIEW_CHANNEL)

        async def general_restricted() -> bool:
            return (await recorded())[CHANNEL] == CHANNEL
        await until(general_restricted, 30)
        assert (await recorded())[minus_role] == minus_role
    finally:
        await stop_bot(app, stop, task)
        await fake.stop()


async def test_a_simulation_started_in_a_private_channel_stays_out_of_other_digests(
        tmp_path, monkeypatch, fake, llm_server, db_url):
    app, stop, task = await start_bot(tmp_path, monkeypatch, fake, llm_server, db_url=db_url)
    try:
        att = fake.add_attachment("layoff-plan.txt", b"The warehouse closes in May.")
        await fake.interaction("testsim", [{"name": "document", "type": 11, "value": att["id"]},
                                                     {"name": "requirement", "type": 3, "value": "reactions?"}],
                                         member=fake.member("6001", roles=(ADMIN_ROLE, STAFF_ROLE)),
                                         attachments=[att], channel=fake.private)
        await fake.wait_for("POST", f"/channels/{fake.private}/messages", lambda c: "finished" in c.content)
        assert "layoff-plan" not in await digest_in(fake, CHANNEL)
        assert "layoff-plan" in await digest_in(fake, fake.private)
    finally:
        await stop_bot(app, stop, task)
