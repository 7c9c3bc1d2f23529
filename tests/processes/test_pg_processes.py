"""Two bot processes (`python -m bot run`, each with its console) on one PostgreSQL: the one
running a simulation is killed with SIGKILL mid-pipeline; once its lease has expired (and not
before) the other process's heartbeat takes the job over as interrupted, says so in the chat,
and `/resume` there continues it without redoing the step the killed process completed.
The SQLite twin of this (a restart after a crash) is tests/processes/test_restart.py."""
from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.report_responder import PipelineResponder
from tests.helpers.bot_process import kill_9, stop
from tests.helpers.config import llm, write_config
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(300)
LEASE_S = 6.0   # long enough that a busy machine never lets a live process's lease lapse


def start(cfg: Path, log: Path) -> subprocess.Popen:
    """A bot process whose console reads the pipe (kept open: the process stays up)."""
    return subprocess.Popen(bot_command("--config", str(cfg), "run"), stdin=subprocess.PIPE, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, text=True, cwd=REPO, env=bot_env(PYTHONUNBUFFERED="1"),
                            start_new_session=True)


def type_in(bot: subprocess.Popen, line: str) -> None:
    assert bot.stdin is not None  # started with stdin=PIPE
    bot.stdin.write(line + "\n")
    bot.stdin.flush()


async def test_a_killed_process_job_is_taken_over_by_the_other_once_its_lease_expired(
        openai_server, tmp_path, pg_server):
    responder = PipelineResponder()
    openai_server.responder = responder
    url = await pg_server.fresh_database()
    cfg = write_config(tmp_path, {"database": {"url": url}, "jobs": {"progress_interval_s": 0.0, "lease_s": LEASE_S},
                                  "llm": llm(openai_server)})
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
        await until(lambda: responder.sim.counts["extraction"] > 0, 120, "the graph step", first)
        kill_9(first)

        [job] = await db.fetch("SELECT id, owner FROM jobs")
        assert job["owner"].split(":")[1] == str(first.pid)
        lease_until = await db.fetchval("SELECT lease_until FROM owners WHERE id=$1", job["owner"])

        def announced() -> bool:
            return "was interrupted: the bot process that ran it stopped" in logs["second"].read_text()
        await until(announced, 10 * LEASE_S, "the second bot to take the job over", second)
        taken = await db.fetchrow("SELECT state, owner, updated_at FROM jobs WHERE id=$1", job["id"])
        assert taken["state"] == "interrupted" and taken["owner"].split(":")[1] == str(second.pid)
        # not before the killed process's lease ran out (updated_at has whole seconds)
        assert datetime.fromisoformat(taken["updated_at"]).timestamp() >= int(lease_until)

        type_in(second, f"/resume {job['id']}")

        def resumed_at_the_graph() -> bool:
            return "graph: extracted" in logs["second"].read_text().split("Resuming", 1)[-1]
        await until(resumed_at_the_graph, 120, "the resumed job's graph step", second)
        assert tuple(await db.fetchrow("SELECT state, owner FROM jobs WHERE id=$1", job["id"])) == (
            "running", taken["owner"])
        assert responder.sim.counts["ontology"] == 1  # the step the killed process finished was kept
    finally:
        for bot in (first, second):
            if bot is not None:
                bot.stdin.close()
                stop(bot)
        await db.close()
