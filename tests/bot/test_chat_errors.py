"""Failures reach the chat as human lines, without the LLM endpoint, server paths or Python's
exception names; the log keeps every detail (bot/public.py)."""
from __future__ import annotations

import asyncio
import logging

import pytest

from bot.neutral import Incoming
from bot.public import public
from engine.jobs import JobError
from engine.llm.errors import LLMError
from tests.helpers.chat import Outlet, RecordingReply, make_app
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)
from tests.helpers.wait import until

ENDPOINT = "http://10.20.30.40:8000/v1"
SECRET_DIR = "/srv/worldbot-private/data/sims/abc123"


@pytest.fixture
async def app(tmp_path):
    app = await make_app(tmp_path)
    channel = RecordingReply()
    app.adapters.add(Outlet("console", lambda scope, channel_id: channel))
    app.channel = channel

    @app.commands.command("llmfail", "fails as the LLM client does")
    async def llmfail(ctx):
        raise LLMError(f"The LLM endpoint {ENDPOINT} could not be reached: check that the server is running "
                       "and that [llm] base_url is right.")

    @app.commands.command("bug", "fails as a bug does")
    async def bug(ctx):
        open(f"{SECRET_DIR}/run.log").read()

    async def broken(ctx):
        raise FileNotFoundError(2, "No such file or directory", f"{SECRET_DIR}/graph.json")

    async def refused(ctx):
        raise JobError(f"simulation abc123 failed in round 3: see {SECRET_DIR}/run.log or {ENDPOINT}/models")

    app.jobs.register("broken", broken)
    app.jobs.register("refused", refused)
    await app.start()
    yield app
    await app.close()


async def command(app, text: str) -> str:
    reply = RecordingReply()
    await app.dispatch(Incoming("console", "console:local", "console", "me", "me", text), reply)
    return reply.sent()


async def finished(app, kind: str) -> str:
    """The final progress line of a job of ``kind`` run in the console channel."""
    job = await app.jobs.submit(kind, {}, "console:local", "console", title=f"{kind} job")
    return await until(lambda: next((text for kind_, text, *_ in app.channel.log
                                     if kind_ == "send" and job.id in text and "❌" in text), None),
                       30, f"the {kind} job's failure")


def assert_clean(text: str) -> None:
    for internal in ("10.20.30.40", "http", "/srv", "worldbot-private", "Error", "Errno", "Traceback"):
        assert internal not in text, (internal, text)


async def test_command_failures_are_human_and_the_log_keeps_the_details(app, caplog):
    caplog.set_level(logging.INFO)
    llm = await command(app, "/llmfail")
    assert llm == "⚠ The LLM endpoint could not be reached: check that the server is running and that [llm] " \
                  "base_url is right."
    bug = await command(app, "/bug")
    assert bug == "⚠ /bug failed because of an error inside the bot; its operator finds the details in the bot's log."
    assert_clean(llm + bug)
    assert ENDPOINT in caplog.text and f"{SECRET_DIR}/run.log" in caplog.text and "FileNotFoundError" in caplog.text


async def test_a_failure_reads_in_the_askers_language(app):
    said = {}
    for locale in ("pt-BR", "th"):
        reply = RecordingReply()
        await app.dispatch(Incoming("console", "console:local", "console", "me", "me", "/bug", locale=locale), reply)
        said[locale] = reply.sent()
    assert said == {"pt-BR": "⚠ /bug falhou por causa de um erro dentro do bot; quem o opera encontra os detalhes no "
                             "log do bot.",
                    "th": "⚠ /bug ล้มเหลวเพราะข้อผิดพลาดภายในบอท ผู้ดูแลบอทดูรายละเอียดได้ในล็อกของบอท"}


async def test_job_failures_are_human_in_progress_and_jobs(app, caplog):
    caplog.set_level(logging.INFO)
    unforeseen = await finished(app, "broken")
    assert unforeseen.endswith("failed: an error inside the bot; its operator finds the details in the bot's log.")
    foreseen = await finished(app, "refused")
    assert foreseen.endswith("failed: simulation abc123 failed in round 3: see run.log or")
    listing = await command(app, "/jobs")
    for text in (unforeseen, foreseen, listing):
        assert_clean(text)
    assert "failed in round 3" in listing and "error inside the bot" in listing
    assert f"{SECRET_DIR}/graph.json" in caplog.text   # the log has it all
    job = (await app.jobs.list(scope="console:local"))[-1]
    assert job.error.startswith("FileNotFoundError") or SECRET_DIR in job.error   # the record keeps it too


def test_public_keeps_commands_and_words_and_drops_addresses_and_paths():
    assert public("/resume 3e2e continues it; see /sim status x and/or 1/2 of it") == \
        "/resume 3e2e continues it; see /sim status x and/or 1/2 of it"
    assert public(f"cannot read {SECRET_DIR}/news.txt at {ENDPOINT}, nor ~/secret/keys.txt") == \
        "cannot read news.txt at, nor keys.txt"


async def test_a_command_the_database_leaves_mid_way_is_one_line_and_no_traceback(tmp_path, restartable_pg, caplog):  # noqa: F811
    """A PostgreSQL restart between a command's start and its next query: the asker reads that
    it was cut short and may try again; the log has one warning, not a bug's traceback."""
    app = await make_app(tmp_path, await restartable_pg.fresh_database())
    entered, gate = asyncio.Event(), asyncio.Event()

    @app.commands.command("count", "reads the database once the test lets it")
    async def count(ctx):
        entered.set()
        await gate.wait()
        n = await app.db.fetchval("SELECT count(*) FROM memory_messages")
        await ctx.reply.send(f"{n} remembered")

    await app.start()
    try:
        asking = asyncio.create_task(command(app, "/count"))
        await asyncio.wait_for(entered.wait(), 30)
        restarting = await restartable_pg.going_down(6.0)
        gate.set()
        with caplog.at_level(logging.WARNING, logger="bot.app"):
            said = await asyncio.wait_for(asking, 60)
        await restarting
        assert said == "⚠ /count was cut short: the bot's database went away while it ran. Try it again in a minute."
        (record,) = [r for r in caplog.records if r.name == "bot.app"]
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert await command(app, "/count") == "0 remembered"   # and the next one runs
    finally:
        await app.close()
