"""A question asked by replying to a report on Telegram is not lost when the bot dies mid-answer:
the real bot process is killed with SIGKILL while the report agent waits on the LLM, and the
restarted bot answers the question (its update stays in the inbox until the answer is sent)."""
from __future__ import annotations

import sqlite3
import time

import pytest

from bot.app import App
from bot.features.simulation.access import simulations
from engine.config import load_config
from tests.engine.sim.report.test_chat import FEATURES, QUESTION, prepare
from tests.fakes.openai_server import Raw, completion
from tests.fakes.reportchat_responder import ReportChatResponder
from tests.fakes.telegram_server import BOT_USER, USER_ID, FakeTelegram
from tests.helpers.bot_process import kill_9, start_bot, stop, telegram_config
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.simdata import sample_simulation
from tests.helpers.wait import until

TOKEN = "123:TEST"
CHAT = -100
REPORT_MESSAGE = 777   # the report's summary, as the bot posted it before the test starts
pytestmark = pytest.mark.timeout(240)


def inbox_rows(db_path) -> int:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT count(*) FROM telegram_inbox").fetchone()[0]
    finally:
        conn.close()


def report_requests(server) -> int:
    return sum((r["messages"][0].get("content") or "").startswith("You are the report agent") for r in server.requests)


async def test_a_question_cut_off_by_kill_9_is_answered_after_the_restart(tmp_path, tmp_path_factory,
                                                                          openai_server):  # noqa: F811
    agent = ReportChatResponder()

    def first_question_stalls(body):
        if report_requests(openai_server) == 1:   # the first attempt: the process dies while it waits
            return Raw(body=completion("too late"), delay=120)
        return agent(body)

    openai_server.responder = first_question_stalls
    server = await FakeTelegram(TOKEN).start()
    cfg = telegram_config(tmp_path, server)
    cfg.write_text(cfg.read_text() + f'[llm]\nbase_url = "{openai_server.base_url}"\nmodel = "m"\n'
                   f'retry_max_wait_s = 1\n')
    app = await App.create(load_config(cfg), FEATURES)
    scope = f"telegram:{CHAT}"
    await prepare(app, sample_simulation(tmp_path_factory, tmp_path), scope, str(CHAT), starter=str(USER_ID))
    await simulations(app).note_report_messages("sim1", scope, str(CHAT), [str(REPORT_MESSAGE)])
    db_path = app.config.db_path
    await app.close()

    first = start_bot(cfg, server, tmp_path / "bot.log")
    second = None
    try:
        await server.wait_for("setMyCommands", timeout=60)
        replied = {"message_id": REPORT_MESSAGE, "date": int(time.time()), "from": BOT_USER,
                   "chat": {"id": CHAT, "type": "supergroup", "title": "Group"}, "text": "📊 Report"}
        server.push_message(CHAT, QUESTION, reply_to=replied)
        await until(lambda: report_requests(openai_server) == 1, 60, "the report agent to ask the LLM", first)
        kill_9(first)
        assert inbox_rows(db_path) == 1   # confirmed to Telegram, not answered: still in the inbox
        assert not any("Report agent of" in (c.params.get("text") or "") for c in server.calls)

        second = start_bot(cfg, server, tmp_path / "bot.log")
        answer = await server.wait_for("sendMessage", lambda c: "Report agent of" in c.params["text"], timeout=90)
        assert "[agent @bob] said" in answer.params["text"]
        assert agent.questions == [QUESTION]
        await until(lambda: inbox_rows(db_path) == 0, 30, "the answered update to leave the inbox", second)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                assert stop(proc) == 0, (tmp_path / "bot.log").read_text()[-3000:]
        await server.stop()
