"""A simulation started without a document, through the console, the command line, the chat
commands and the real python-telegram-bot on the Telegram fake (on the Discord fake, with a private
channel: test_privacy.py): a brief drafted by the LLM from the question, shown with an estimate that
counts its call, started on /confirm; a brief taken from a world of this chat's memory, or this
channel's; what is refused before anything is spent; and /forget taking a member's lines out of
briefs no run has read, while a simulation whose run read them says so in /sim status."""
from __future__ import annotations

import asyncio
import json
import re

import pytest

from bot.adapters import telegram_adapter
from bot.adapters.console import Console
from bot.cli import main
from engine.memory.audience import Viewer
from engine.sim import pipeline
from engine.sim.seed.brief import FILE
from tests.fakes.openai_server import Raw
from tests.fakes.sim_responder import SimResponder, kind_of
from tests.fakes.telegram_server import USER_ID
from tests.helpers.chat import Person, make_app, serving
from tests.helpers.config import llm, write_config
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.memory import add_belief
from tests.helpers.sim import console_session
from tests.helpers.telegram import fake_telegram, text_of  # noqa: F401
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(300)
FEATURES = ["bot.features.core", "bot.features.memory", "bot.features.simulation"]
QUESTION = "Will the Valmora dockworkers strike over the new cranes?"
CHATTER = ["The dockworkers union votes on a strike at the Valmora port on Monday.",
           "Harbor Logistics says the new cranes will cut a third of the port jobs.",
           "I think the port strike will last a week, the union is angry about the cranes."]


def console_app(tmp_path, server, **simulation):
    """A console bot with memory whose simulations run steps 1-3 (the run and the report have tests
    of their own), for the length of a block."""
    return console_session(tmp_path, llm(server), steps=3, features=FEATURES, default_agents=3, **simulation)


async def said(console: Console, capsys, line: str) -> str:
    await console.handle_line(line)
    return capsys.readouterr().out


def started(out: str) -> tuple[str, str]:
    found = re.search(r"Simulation `(\w+)` started \(job `(\w+)`\)", out)
    assert found, out
    return found.group(1), found.group(2)


async def test_without_a_document_the_llm_drafts_a_brief_shown_with_the_estimate_before_confirm(
        openai_server, embedder, tmp_path, capsys):
    responder = SimResponder()
    openai_server.responder = responder
    async with console_app(tmp_path, openai_server, confirm_above_tokens=1) as (app, console):
        out = await said(console, capsys, f"/simulate {QUESTION} --agents 3 --rounds 2")
        assert "📝 No document given: the LLM drafted this brief from your question" in out
        assert "# Valmora Port Faces a Strike Vote" in out and "- Maria Lopez (person):" in out
        assert re.search(r"This simulation \(from a brief drafted by the LLM from the question, 3 agents \(the actors "
                         r"the documents name, then members of the public\), 2 rounds\) would take about [\d,]+ LLM "
                         r"calls and [\d,]+ tokens \(the brief: 1 call, [\d,]+ tokens, already spent", out), out
        assert dict(responder.counts) == {"brief": 1}          # nothing else is asked before /confirm
        code = re.search(r"/confirm (\w+)", out).group(1)
        sim_id, job_id = started(await said(console, capsys, f"/confirm {code}"))
        assert (await app.jobs.wait(job_id)).state == "done"
        sim = await app.sims.get(sim_id)
        brief = (sim.folder / "documents" / FILE).read_text()
        assert brief.startswith("# Valmora Port Faces a Strike Vote\n") and brief.strip() in out
        assert sim.spec.documents == [FILE]
        read = json.loads((sim.folder / "documents.json").read_text())   # the pipeline read the brief
        assert "Maria Lopez" in json.dumps(read)
        assert "Maria Lopez" in {e.name for e in await app.sims.graph.entities(sim_id)}
        assert responder.counts["brief"] == 1 and responder.counts["ontology"] == 1
        status = await said(console, capsys, f"/sim status {sim_id}")
        assert f"{FILE}: drafted by the LLM from the question (no document was given)" in status
        usage = await app.db.fetchval("SELECT sum(calls) FROM llm_usage WHERE job='simulation.brief'")
        assert usage == 1


async def test_a_world_of_this_chats_memory_seeds_a_simulation_and_bad_asks_are_refused_first(
        openai_server, embedder, tmp_path, capsys):
    responder = SimResponder()
    openai_server.responder = responder
    async with console_app(tmp_path, openai_server) as (app, console):
        for line in CHATTER:
            await console.handle_line(line)
        await app.settled()
        world = re.search(r"`(\w{8})`", await said(console, capsys, "/worlds")).group(1)
        refusals = {
            f"/simulate --world nosuch {QUESTION}": "no world matches 'nosuch'. /worlds lists them.",
            f"/simulate --world {world} --from-chat {QUESTION}": "--world or --from-chat: one of them",
            f"/simulate --since 2d {QUESTION}": "--since goes with --world or --from-chat",
            f"/simulate --from-chat --since 2x {QUESTION}": "since must look like 2h, 30m, 3d",
            f"/simulate notes.pdf {QUESTION}": "notes.pdf: no such file",
            f"/simulate --world {world} {QUESTION} --rounds 0": "rounds",
        }
        for line, refusal in refusals.items():
            assert refusal in await said(console, capsys, line), line
        assert not openai_server.requests and not await app.sims.listing(Viewer("console:local"))

        sim_id, job_id = started(await said(console, capsys, f"/simulate --world {world} {QUESTION} --agents 3 "
                                                             "--rounds 2"))
        assert (await app.jobs.wait(job_id)).state == "done"
        sim = await app.sims.get(sim_id)
        brief = (sim.folder / "documents" / FILE).read_text()
        assert brief.startswith("# What this chat said: the world “") and f"({world})" in brief
        assert all(re.search(rf"^- \d\d:\d\d \w+: {re.escape(text)}$", brief, re.M) for text in CHATTER), brief
        assert "brief" not in responder.counts                        # memory's brief costs no call
        status = await said(console, capsys, f"/sim status {sim_id}")
        assert f"{FILE}: taken from this chat's memory of the world “" in status and "3 lines left" in status
        sim_id, _ = started(await said(console, capsys, f"/simulate --from-chat --since 1h {QUESTION}"))
        assert "this channel since" in (await app.sims.brief_state(sim_id)).source


def test_the_command_line_seeds_from_a_chats_world_or_channel(
        openai_server, embedder, tmp_path, capsys):
    openai_server.responder = SimResponder()
    cfg = write_config(tmp_path, {"llm": llm(openai_server), "simulation": {"default_agents": 3}})

    async def remember() -> str:
        app = await make_app(tmp_path, llm=llm(openai_server))
        await app.start()
        try:
            person = Person(app, "ann")
            for text in CHATTER:   # Person speaks in console:test, #general
                await person.say(text)
            await app.settled()
            return (await app.memory.worlds("console:test"))[0].id
        finally:
            await app.close()

    world = asyncio.run(remember())
    assert main(["--config", str(cfg), "simulate", "--world", world, "-r", QUESTION]) == 2
    assert "--world and --from-chat need --scope S" in capsys.readouterr().err
    assert main(["--config", str(cfg), "simulate", "--scope", "console:test", "--from-chat", "-r", QUESTION]) == 2
    assert "--from-chat needs --channel C" in capsys.readouterr().err
    assert main(["--config", str(cfg), "simulate", "--scope", "console:test", "--world", "nosuch", "-r",
                 QUESTION]) == 2
    assert "no world matches 'nosuch'" in capsys.readouterr().err

    # the ontology step fails at once: the simulation is made, seeded from the world, and left resumable
    openai_server.responder = lambda body: Raw(401, {"error": {"message": "bad key"}}) if kind_of(
        body) == "ontology" else SimResponder()(body)
    assert main(["--config", str(cfg), "simulate", "--scope", "console:test", "--world", world, "-r", QUESTION,
                 "--out", str(tmp_path / "from-world")]) == 1
    err = capsys.readouterr().err
    assert "a brief taken from this chat's memory of the world “" in err and "3 messages" in err
    brief = (tmp_path / "from-world" / "documents" / FILE).read_text()
    assert all(text in brief for text in CHATTER)
    assert main(["--config", str(cfg), "simulate", "--scope", "console:test", "--from-chat", "--channel", "general",
                 "-r", QUESTION, "--out", str(tmp_path / "from-chat")]) == 1
    assert all(text in (tmp_path / "from-chat" / "documents" / FILE).read_text() for text in CHATTER)


async def test_forget_takes_a_members_lines_out_of_briefs_and_a_run_that_read_them_says_so(
        openai_server, embedder, tmp_path, db_url):
    openai_server.responder = SimResponder()
    app = await make_app(tmp_path, db_url, llm=llm(openai_server),
                         simulation={"confirm_above_tokens": 1, "default_agents": 3})
    app.sims.steps = pipeline.STEPS[:1]       # the ontology step reads the brief, and that is enough here
    await app.start()
    try:
        ann, bob, admin = Person(app, "ann"), Person(app, "bob"), Person(app, "root", admin=True)
        await ann.say(CHATTER[0])
        await bob.say(CHATTER[1])
        await ann.say(CHATTER[2])
        await app.settled()
        memory = app.memory
        await memory.embedded()   # a belief rests on messages routed to a world
        rows = await app.db.fetchall("SELECT id, world_id FROM memory_messages ORDER BY id")
        await add_belief(memory, app.db, "console:test", rows[0]["world_id"], "the union", "votes on a strike",
                         [rows[0]["id"]])
        waiting = await admin.say(f"/simulate --from-chat {QUESTION}")          # waits for /confirm
        code = re.search(r"/confirm (\w+)", waiting).group(1)
        pending, _ = await app.sims.create([], QUESTION, "console:test", "general",
                                           brief=await app.sims.memory_brief(Viewer("console:test"), channel="general"))
        read, _ = await app.sims.create([], QUESTION, "console:test", "general",
                                        brief=await app.sims.memory_brief(Viewer("console:test"), channel="general"))
        job = await app.sims.submit(read, "console:test", "general", "root")
        assert (await app.jobs.wait(job.id)).state == "done"
        for sim_id in (pending, read):
            assert CHATTER[0] in brief_text(app, sim_id) and "votes on a strike (from what ann said)" in \
                brief_text(app, sim_id)

        assert "This deletes" in await ann.say("/forget me")
        await ann.say("/forget confirm")
        await until(lambda: CHATTER[0] not in brief_text(app, pending), 30, "ann's lines to leave the brief")
        for sim_id in (pending, read):   # both files lose ann's lines and her belief; bob's stays
            text = brief_text(app, sim_id)
            assert CHATTER[0] not in text and CHATTER[2] not in text and "votes on a strike" not in text
            assert CHATTER[1] in text and "1 message" in text
        left = await app.sims.brief_state(pending)
        assert (left.removed, left.forgotten) == (3, 0)
        assert (await app.sims.brief_state(read)).forgotten == 3
        status = await admin.say(f"/sim status {read}")
        assert "⚠ built on 3 lines of the chat that their authors have since asked the bot to forget" in status
        assert "3 lines forgotten at their authors' request before the run read it" in \
            await admin.say(f"/sim status {pending}")

        await admin.say(f"/confirm {code}")    # its brief, taken before ann forgot, is checked again first
        made = (await app.sims.listing(Viewer("console:test")))[0].id
        assert made not in (pending, read)
        assert CHATTER[0] not in brief_text(app, made) and CHATTER[1] in brief_text(app, made)
        assert (await app.sims.brief_state(made)).removed == 3

        await bob.say("/forget me")
        await bob.say("/forget confirm")
        await until(lambda: CHATTER[1] not in brief_text(app, pending), 30, "bob's line to leave the brief")
        assert "Nothing is left of it" in brief_text(app, pending)
        assert "memory holds nothing of this channel since then" in await admin.say(f"/simulate --from-chat {QUESTION}")
        job = await app.sims.submit(pending, "console:test", "general", "root")
        failed = await app.jobs.wait(job.id)
        assert failed.state == "failed" and "nothing is left of the brief" in failed.error
    finally:
        await app.jobs.shutdown()
        await app.close()


def brief_text(app, sim_id: str) -> str:
    return (app.config.data_dir / "sims" / sim_id / "documents" / FILE).read_text()


async def test_on_telegram_a_group_starts_one_from_the_question_alone_or_from_a_world(
        openai_server, embedder, tmp_path, fake_telegram):
    openai_server.responder = SimResponder()
    server = fake_telegram
    app = await make_app(tmp_path, llm=llm(openai_server), simulation={"default_agents": 3},
                         telegram={"token_env": "TG_TEST_TOKEN", "base_url": server.base_url,
                                   "base_file_url": server.base_file_url, "poll_timeout_s": 1})
    app.sims.steps = pipeline.STEPS[:1]
    group = -100500
    server.admins.add((group, USER_ID))
    async with serving(app, telegram_adapter.TelegramAdapter, stop_within=20):
        await server.wait_for("setMyCommands")
        server.push_message(group, f"/simulate {QUESTION} --agents 3 --rounds 2")
        shown = await server.wait_for("sendMessage", lambda c: "📝 No document given" in text_of(c))
        assert "Valmora Port Faces a Strike Vote" in text_of(shown)
        first = await server.wait_for("sendMessage", lambda c: "started (job" in text_of(c))
        assert "from its brief brief.md, drafted by the LLM from the question" in text_of(first)

        for text in CHATTER:
            server.push_message(group, text)
        await until(lambda: _count(app, group, 3), 30, "the group's three messages in memory")
        await app.memory.embedded()   # and routed to their world, whose id /worlds would show
        world = await app.db.fetchval("SELECT world_id FROM memory_messages WHERE scope=?", (f"telegram:{group}",))
        server.push_message(group, f"/simulate --world {world} {QUESTION} --agents 3 --rounds 2")
        second = await server.wait_for("sendMessage", lambda c: "started (job" in text_of(c) and c is not first)
        assert "taken from this chat's memory of the world" in text_of(second) and "3 messages" in text_of(second)
        made = re.search(r"Simulation <code>(\w+)</code>", text_of(second)).group(1)
        brief = (app.config.data_dir / "sims" / made / "documents" / FILE).read_text()
        assert all(f"User{USER_ID}: {text}" in brief for text in CHATTER)


async def _count(app, group: int, n: int) -> bool:
    return await app.db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=?", (f"telegram:{group}",)) >= n
