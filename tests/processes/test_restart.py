"""A real crash: the bot process is killed with SIGKILL mid-simulation, started again, told
about the interrupted job, and `/resume` finishes it without redoing completed steps.
Console `--wait` keeps the process alive until the job it started has ended."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess

from engine.db import open_database
from tests.conftest import REPO, bot_command, bot_env
from tests.fakes.report_responder import PipelineResponder
from tests.helpers.config import llm, write_config
from tests.helpers.llm_fixtures import fake_openai, openai_server, sqlite_only  # noqa: F401
from tests.helpers.sim import SAMPLE
from tests.helpers.wait import until


async def jobs(db_url: str) -> list[tuple[str, str]]:
    db = await open_database(db_url, upgrade=False)
    try:
        return [tuple(row) for row in await db.fetchall("SELECT id, state FROM jobs")]
    finally:
        await db.close()


# SQLite only (62 s a backend): tests/processes/test_pg_processes.py is its PostgreSQL twin (kill -9
# mid-pipeline, resumed).
@sqlite_only
async def test_kill_9_then_restart_reports_and_resumes_without_redoing_steps(openai_server, tmp_path, db_url):
    responder = PipelineResponder()
    openai_server.responder = responder
    cfg = write_config(tmp_path, {"database": {"url": db_url}, "jobs": {"progress_interval_s": 0.0},
                                  "llm": llm(openai_server)})
    first = subprocess.Popen(bot_command("--config", str(cfg), "run"), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
                             env=bot_env(), start_new_session=True)
    try:
        first.stdin.write(f"/simulate {SAMPLE} what happens next? --agents 6 --rounds 2\n")
        first.stdin.flush()
        # the ontology step has finished once chunk extraction requests arrive
        await until(lambda: responder.sim.counts["extraction"] > 0, 120, "the graph step", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
    [(job_id, state)] = await jobs(db_url)
    assert state == "running"  # what a killed process leaves behind
    assert responder.sim.counts["ontology"] == 1

    second = await asyncio.to_thread(
        subprocess.run, bot_command("--config", str(cfg), "run", "--wait"), input=f"/jobs\n/resume {job_id}\n",
        capture_output=True, text=True, timeout=400, cwd=REPO, env=bot_env())
    assert second.returncode == 0, second.stderr[-3000:]
    out = second.stdout
    assert f"(`{job_id}`) was interrupted by a restart" in out
    assert f"`{job_id}`" in out and "interrupted" in out.split("/resume")[0]
    assert "Resuming" in out
    assert f"(`{job_id}`) finished" in out  # --wait kept the console open until the end
    assert await jobs(db_url) == [(job_id, "done")]
    assert responder.sim.counts["ontology"] == 1  # step 1 was not redone after the crash
    assert responder.report.counts["outline"] == 1
