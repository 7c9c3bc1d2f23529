"""Separate bot processes on one database: a bot runs a long simulation while a console lists
/jobs, and `worlds` and `simulate` run from a terminal. They neither interrupt its job nor signal its run
child, and they refuse to resume or cancel it. Once the bot is killed with SIGKILL and its
lease has run out, the next process recovers its job as interrupted."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import time

import pytest

from engine.owners import process_start
from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.report_responder import PipelineResponder
from tests.helpers.config import llm, write_config
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE

pytestmark = pytest.mark.timeout(900)
LEASE_S = 6.0  # every process sweeps for expired leases while it runs: a busy machine must not let the bot's lapse


def query(tmp_path, sql: str, args=()) -> list[tuple]:
    with sqlite3.connect(f"file:{tmp_path / 'data' / 'bot.sqlite3'}?mode=rw", uri=True, timeout=10) as conn:
        return conn.execute(sql, args).fetchall()


def query_once_ready(tmp_path, sql: str) -> list[tuple]:
    """``query``, or nothing while the bot has not created and migrated its database yet."""
    try:
        return query(tmp_path, sql)
    except sqlite3.OperationalError as err:
        if "unable to open" in str(err) or "no such table" in str(err):
            return []
        raise


def wait_for(what: str, predicate, timeout: float, bot: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        assert bot is None or bot.poll() is None, f"the bot exited while waiting for {what}"
        time.sleep(0.1)
    return result


def run_bot(cfg, *args: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(bot_command("--config", str(cfg), *args), input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=bot_env())


def rounds_done(tmp_path, sim_id: str) -> int:
    [(done,)] = query(tmp_path, "SELECT rounds_done FROM sim_runs WHERE sim_id=?", (sim_id,))
    return min(json.loads(done).values(), default=0)


# SQLite only (89 s): tests/processes/test_pg_processes.py runs two bot processes on PostgreSQL, one
# killed with SIGKILL.
def test_other_processes_leave_a_running_bot_alone_until_it_is_killed(openai_server, tmp_path):
    openai_server.responder = PipelineResponder(delay=1.0)  # every agent step is slow: a long run
    cfg = write_config(tmp_path, {"jobs": {"progress_interval_s": 0.0, "lease_s": LEASE_S}, "llm": llm(openai_server),
                                  "simulation": {"max_rounds": 1000, "confirm_above_usd": 0,
                                                 "confirm_above_tokens": 0}})
    log = open(tmp_path / "bot.log", "w")
    bot = subprocess.Popen(bot_command("--config", str(cfg), "run"), stdin=subprocess.PIPE, stdout=log,
                           stderr=subprocess.STDOUT, text=True, cwd=REPO, env=bot_env())
    try:
        bot.stdin.write(f"/simulate {SAMPLE} what happens next? --agents 4 --rounds 1000\n")
        bot.stdin.flush()
        [(sim_id, child)] = wait_for("the run to start", lambda: query_once_ready(
            tmp_path, "SELECT sim_id, pid FROM sim_runs WHERE status='running' AND pid IS NOT NULL"), 300, bot)
        started = process_start(child)
        [(job_id, owner)] = query(tmp_path, "SELECT id, owner FROM jobs")
        assert owner.split(":")[1] == str(bot.pid)
        wait_for("a first round", lambda: rounds_done(tmp_path, sim_id) >= 1, 120, bot)

        # a console on the same database lists the job as running and may not resume or cancel it
        console = run_bot(cfg, stdin=f"/jobs\n/resume {job_id}\n/cancel {job_id}\n")
        assert console.returncode == 0, console.stderr[-3000:]
        out = console.stdout
        assert f"`{job_id}` simulation" in out and "— running" in out
        assert f"job {job_id} is running in another bot process (pid {bot.pid} on " in out
        assert "it cannot be resumed while that process runs it" in out
        assert f"job {job_id} runs in another bot process (pid {bot.pid} on " in out and "cancel it there" in out
        assert "interrupted" not in out

        # listing the worlds from a terminal only reads
        worlds = run_bot(cfg, "worlds")
        assert worlds.returncode == 0 and "no worlds yet" in worlds.stdout, worlds.stderr[-3000:]

        # `simulate` from a terminal: resuming the running simulation is refused, a new one runs
        resumed = run_bot(cfg, "simulate", "--resume", sim_id)
        assert resumed.returncode == 2
        assert f"simulation {sim_id} is running in another bot process (pid {bot.pid} on " in resumed.stderr
        before = rounds_done(tmp_path, sim_id)
        other = run_bot(cfg, "simulate", str(SAMPLE), "-r", "who gives in first?", "--agents", "3",
                        "--rounds", "1", timeout=600)
        assert other.returncode == 0, other.stderr[-3000:]

        # the bot's run went on undisturbed: same child, still running, more rounds done
        assert process_start(child) == started
        assert query(tmp_path, "SELECT state FROM jobs WHERE id=?", (job_id,)) == [("running",)]
        assert query(tmp_path, "SELECT status, pid FROM sim_runs WHERE sim_id=?", (sim_id,)) == [("running", child)]
        wait_for("more rounds", lambda: rounds_done(tmp_path, sim_id) > before, 120, bot)
        assert bot.poll() is None
    finally:
        bot.kill()  # SIGKILL: no shutdown, the rows stay 'running'
        bot.wait(10)
        log.close()

    # its child notices its parent is gone: it ends its round and exits by itself
    wait_for("the orphaned child to exit", lambda: process_start(child) == "", 120)
    assert query(tmp_path, "SELECT state FROM jobs WHERE id=?", (job_id,)) == [("running",)]
    wait_for("the killed bot's lease to run out", lambda: not query(
        tmp_path, "SELECT 1 FROM owners WHERE id=? AND lease_until > ?", (owner, time.time())), 3 * LEASE_S)

    restarted = run_bot(cfg, stdin="/jobs\n")
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert f"(`{job_id}`) was interrupted by a restart" in restarted.stdout
    assert query(tmp_path, "SELECT state FROM jobs WHERE id=?", (job_id,)) == [("interrupted",)]
    assert query(tmp_path, "SELECT status FROM sim_runs WHERE sim_id=?", (sim_id,)) == [("interrupted",)]
