"""Downloaded attachments and outgoing files are deleted after use and by age; simulation
folders, files a job still needs and files outside the two folders are never touched."""
from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from bot.adapters import telegram_adapter
from bot.adapters.base import serve
from bot.files import FileRetention
from engine.jobs import JobRunner
from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.sim_responder import SimResponder
from tests.fakes.telegram_server import FakeTelegram
from tests.helpers.chat import make_app
from tests.helpers.llm_fixtures import openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import SAMPLE
from tests.helpers.telegram import tg  # noqa: F401  (the bot on the Telegram fake, with /testsim)
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(120)
DAY = 24 * 3600


def put(path: Path, age_s: float = 0.0, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


async def test_sweep_removes_old_downloads_and_outgoing_files_only(config, db, tmp_path):
    data = config.data_dir
    old_download = put(data / "downloads" / "telegram" / "55" / "1_old.txt", 2 * DAY)
    fresh_download = put(data / "downloads" / "telegram" / "55" / "2_new.txt")
    old_outgoing = put(data / "outgoing" / "discord" / "answer-1.md", 2 * DAY)
    lone_old = put(data / "downloads" / "discord" / "77" / "9_lone.txt", 2 * DAY)
    held = put(data / "downloads" / "discord" / "78" / "held.txt", 2 * DAY)
    running = put(data / "downloads" / "discord" / "79" / "running.txt", 2 * DAY)
    sim_doc = put(data / "sims" / "abcd1234" / "documents" / "news.txt", 30 * DAY)
    sim_log = put(data / "sims" / "abcd1234" / "run.log", 30 * DAY)
    user_file = put(tmp_path / "mine" / "policy.txt", 30 * DAY)

    jobs = JobRunner(db)
    gate = asyncio.Event()

    async def reads_later(ctx):
        await gate.wait()
        return {}

    jobs.register("reader", reads_later)
    job = await jobs.submit("reader", {"path": str(running)}, scope="console:local")
    files = FileRetention(data, 24.0, db)
    files.hold([held, user_file], 60)

    assert await files.sweep() == 3
    assert not old_download.exists() and not old_outgoing.exists() and not lone_old.exists()
    assert not lone_old.parent.exists()  # the emptied channel folder goes too
    assert (data / "downloads").is_dir() and (data / "outgoing").is_dir()
    for kept in (fresh_download, held, running, sim_doc, sim_log, user_file):
        assert kept.exists(), kept

    # a day later the fresh file has aged too; the job's file goes once the job is done
    gate.set()
    await jobs.wait(job.id)
    assert await files.sweep(now=time.time() + 2 * DAY) == 2  # fresh_download and running
    assert held.exists() and sim_doc.exists() and sim_log.exists() and user_file.exists()
    await jobs.shutdown()


async def test_discard_keeps_files_a_resumable_job_names_and_ignores_other_paths(config, db, tmp_path):
    data = config.data_dir
    used = put(data / "downloads" / "telegram" / "1" / "used.txt")
    for_failed_job = put(data / "downloads" / "telegram" / "1" / "failed.txt")
    elsewhere = put(tmp_path / "elsewhere.txt")
    precious = put(data / "precious.txt")
    sneaky = data / "downloads" / ".." / "precious.txt"

    jobs = JobRunner(db)

    async def fails(ctx):
        raise RuntimeError("boom")

    jobs.register("fails", fails)
    job = await jobs.submit("fails", {"files": [{"path": str(for_failed_job)}]}, scope="console:local")
    assert (await jobs.wait(job.id)).state == "failed"  # /resume could still need its file
    files = FileRetention(data, 24.0, db)
    assert await files.discard([used, for_failed_job, elsewhere, sneaky, None]) == 1
    assert not used.exists() and for_failed_job.exists() and elsewhere.exists()
    assert precious.exists()
    await jobs.shutdown()


async def test_a_download_lives_while_its_job_needs_it_and_goes_after(tg):
    app, server, runs, gate = tg
    downloads = app.config.data_dir / "downloads" / "telegram" / "55"
    server.add_file("doc1", "news.txt", b"The river rose overnight.")
    server.push_message(55, "/testsim what happens next?",
                        document={"file_id": "doc1", "file_name": "news.txt", "file_size": 25})
    await server.wait_for("sendMessage", lambda c: "Started" in (c.params.get("text") or ""))
    assert [p.name for p in downloads.glob("*news.txt")]  # the command is over, the job still reads it
    gate.set()
    await server.wait_for("sendDocument")
    await until(lambda: not list(downloads.glob("*news.txt")), 20)
    assert runs == [{"text": "The river rose overnight.", "requirement": "what happens next?"}]


@sqlite_only
async def test_a_command_refused_for_its_arguments_downloads_nothing(tg):
    app, server, runs, gate = tg
    downloads = app.config.data_dir / "downloads" / "telegram" / "56"
    server.add_file("doc2", "draft.txt", b"A new tax on bread.")
    server.push_message(56, "/testsim reactions? --rounds many",
                        document={"file_id": "doc2", "file_name": "draft.txt", "file_size": 19})
    await server.wait_for("sendMessage", lambda c: "rounds" in (c.params.get("text") or ""))
    assert not server.calls_of("getFile")
    assert not list(downloads.glob("*draft.txt"))
    assert runs == []


def test_the_bot_sweeps_old_downloads_when_it_starts(tmp_path):
    data = tmp_path / "data"
    old = put(data / "downloads" / "discord" / "9" / "1_old.pdf", 3 * DAY)
    fresh = put(data / "downloads" / "discord" / "9" / "2_fresh.pdf", 3600)
    sim_doc = put(data / "sims" / "feed1234" / "documents" / "old.pdf", 30 * DAY)
    config = tmp_path / "config.toml"
    config.write_text('[bot]\ndata_dir = "data"\nfile_retention_hours = 48\n')
    done = subprocess.run(bot_command("--config", str(config), "run"), input="/help\n", capture_output=True,
                          text=True, timeout=120, env=bot_env(), cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    assert not old.exists() and fresh.exists() and sim_doc.exists()


async def test_a_simulation_waiting_for_confirm_keeps_its_download(openai_server, tmp_path, monkeypatch):
    openai_server.responder = SimResponder()
    monkeypatch.setenv("TG_TEST_TOKEN", "123:TEST")
    server = await FakeTelegram("123:TEST").start()
    app = await make_app(tmp_path, telegram={
        "token_env": "TG_TEST_TOKEN", "base_url": server.base_url, "base_file_url": server.base_file_url,
        "poll_timeout_s": 1}, bot={"owner_ids": ["telegram:58"]}, llm={"base_url": openai_server.base_url, "model": "m",
                                   "prices": {"m": {"input": 100.0, "output": 100.0}}},
        simulation={"confirm_above_usd": 0.5})
    await app.start()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(app.adapters.add(telegram_adapter.TelegramAdapter(app)), stop))
    downloads = app.config.data_dir / "downloads" / "telegram" / "58"
    try:
        await server.wait_for("setMyCommands")
        server.add_file("doc3", "strike.md", SAMPLE.read_bytes())
        server.push_message(58, "/simulate How will the strike end? --agents 3 --rounds 2", user_id=58,
                            document={"file_id": "doc3", "file_name": "strike.md", "file_size": SAMPLE.stat().st_size})
        asked = await server.wait_for("sendMessage", lambda c: "/confirm" in (c.params.get("text") or ""))
        code = asked.params["text"].split("/confirm ", 1)[1].split()[0]
        server.push_message(58, f"/confirm {code}", user_id=58)  # the /simulate command is over by now
        await server.wait_for("sendMessage", lambda c: "Simulation " in (c.params.get("text") or ""))
        await app.jobs.shutdown()
        [copied] = (app.config.data_dir / "sims").glob("*/documents/*strike.md")
        assert copied.read_bytes() == SAMPLE.read_bytes()
        assert list(downloads.glob("*strike.md"))  # held until the confirmation would have expired
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await app.close()
        await server.stop()
