"""Two bot processes (`python -m bot run`, each with its console) on one PostgreSQL: the one
running a simulation is killed with SIGKILL mid-pipeline; once its lease has expired (and not
before) the other process's heartbeat takes the job over as interrupted, says so in the chat,
and `/resume` there continues it without redoing the step the killed process completed.
The SQLite twin of this (a restart after a crash) is tests/test_restart.py."""
from __future__ import annotations

import asyncio
import subprocess
import time
from datetime import datetime
from pathlib import Path

import asyncpg
import pytest

from tests.bot_process import kill_9, stop, wait_until
from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.report_responder import PipelineResponder
from tests.llm_fixtures import fake_openai, openai_server  # noqa: F401

pytestmark = pytest.mark.timeout(300)
SAMPLE = REPO / "tests" / "data" / "harbour_strike.md"
LEASE_S = 6.0   # long enough that a busy machine never lets a live process's lease lapse


def write_config(tmp_path: Path, server, url: str) -> Path:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[bot]\ndata_dir = "data"\n[database]\nurl = "{url}"\n'
                   f'[jobs]\nprogress_interval_s = 0.0\nlease_s = {LEASE_S}\n'
                   f'[llm]\nbase_url = "{server.base_url}"\nretry_max_wait_s = 0.05\n')
    return cfg


def start(cfg: Path, log: Path) -> subprocess.Popen:
    """A bot process whose console reads the pipe (kept open: the process stays up)."""
    return subprocess.Popen(bot_command("--config", str(cfg), "run"), stdin=subprocess.PIPE, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, env=bot_env(PYTHONUNBUFFERED="1"),
                            start_new_session=True)


async def until(condition, timeout: float, what: str, bot: subprocess.Popen) -> None:
    """Poll the awaitable ``condition()`` until it is true (AssertionError on timeout or if ``bot`` exits)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        assert bot.poll() is None, f"the bot exited ({bot.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(0.05)


def type_in(bot: subprocess.Popen, line: str) -> None:
    bot.stdin.write(line + "\n")
    bot.stdin.flush()


async def test_a_killed_process_job_is_taken_over_by_the_other_once_its_lease_expired(
        openai_server, tmp_path, pg_server):
    responder = PipelineResponder()
    openai_server.responder = responder
    url = await pg_server.fresh_database()
    cfg = write_config(tmp_path, openai_server, url)
    db = await asyncpg.connect(url)
    logs = {name: tmp_path / f"{name}.log" for name in ("first", "second")}
    first = second = None
    try:
        second = start(cfg, logs["second"])   # up before the job starts: it has nothing to recover

        async def second_started() -> bool:   # its owner row is written once it has started
            try:
                return await db.fetchval("SELECT count(*) FROM owners") == 1
            except asyncpg.UndefinedTableError:
                return False   # still migrating
        await until(second_started, 120, "the second bot", second)
        first = start(cfg, logs["first"])
        type_in(first, f"/simulate {SAMPLE} what happens next? --agents 3 --rounds 1")
        # the ontology step has finished once chunk extraction requests arrive
        await wait_until(lambda: responder.sim.counts["extraction"] > 0, 120, "the graph step", first)
        kill_9(first)

        [job] = await db.fetch("SELECT id, owner FROM jobs")
        assert job["owner"].split(":")[1] == str(first.pid)
        lease_until = await db.fetchval("SELECT lease_until FROM owners WHERE id=$1", job["owner"])

        def announced() -> bool:
            return "was interrupted: the bot process that ran it stopped" in logs["second"].read_text()
        await wait_until(announced, 10 * LEASE_S, "the second bot to take the job over", second)
        taken = await db.fetchrow("SELECT state, owner, updated_at FROM jobs WHERE id=$1", job["id"])
        assert taken["state"] == "interrupted" and taken["owner"].split(":")[1] == str(second.pid)
        # not before the killed process's lease ran out (updated_at has whole seconds)
        assert datetime.fromisoformat(taken["updated_at"]).timestamp() >= int(lease_until)

        type_in(second, f"/resume {job['id']}")

        def resumed_at_the_graph() -> bool:
            return "graph: extracted" in logs["second"].read_text().split("Resuming", 1)[-1]
        await wait_until(resumed_at_the_graph, 120, "the resumed job's graph step", second)
        assert tuple(await db.fetchrow("SELECT state, owner FROM jobs WHERE id=$1", job["id"])) == (
            "running", taken["owner"])
        assert responder.sim.counts["ontology"] == 1  # the step the killed process finished was kept
    finally:
        for bot in (first, second):
            if bot is not None:
                bot.stdin.close()
                stop(bot)
        await db.close()
