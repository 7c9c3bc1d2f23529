"""A simulation's progress tells the truth, through the console: states in order, the run shown
as running with its round in /sim status, a stop shown as stopped (not failed) after round k of
n, and the action counter going on after a resume."""
from __future__ import annotations

import json
import re

import pytest

from bot.app import LANGUAGE_SETTING
from engine.i18n import using
from engine.sim.pipeline import step_line
from tests.fakes.openai_server import SocialResponder
from tests.fakes.stance_responder import WithStances
from tests.helpers.llm_fixtures import fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import console_bot, make_sim_folder
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(300)


async def output_until(capsys, text: str) -> str:
    """The console's output up to and including the line that holds ``text`` (the progress
    message is followed in a task of its own: its last edit lands after the job ends)."""
    out = ""

    async def seen() -> bool:
        nonlocal out
        out += capsys.readouterr().out
        return text in out
    await until(seen, timeout=30)
    return out


def states_shown(out: str, job_id: str) -> list[str]:
    """The job states its progress lines showed, in order, repeats collapsed."""
    shown: list[str] = []
    for state in re.findall(rf"\(`{job_id}`\) (\w+)", out):
        if not shown or shown[-1] != state:
            shown.append(state)
    return shown


# SQLite only (a real OASIS run): the run and job rows it reads run on both backends in test_simrun.py.
async def test_states_in_order_running_step_stop_and_counters_after_resume(openai_server, tmp_path, capsys):
    openai_server.responder = WithStances(SocialResponder(delay=0.2))   # slow enough to look during a round
    app, console = await console_bot(tmp_path, openai_server.base_url, run_idle_s=0)
    runs = app.sims.runs
    try:
        folder = tmp_path / "sim"
        make_sim_folder(folder, agents=4, rounds=8, sim_id="p1", everyone_everywhere=True)
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('p1', 'console:local', 'console', 'toll?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "toll?"}), str(folder)))
        for step in ("ontology", "graph", "environment"):
            await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('p1', ?, 'x')", (step,))
        job = await app.jobs.submit("simulation", {"sim_id": "p1"}, "console:local", channel="console",
                                    title="simulation p1")
        await app.db.execute("UPDATE simulations SET job_id=? WHERE id='p1'", (job.id,))

        async def rounds_done(n: int) -> bool:
            state = await runs.get("p1")
            return bool(state and state.status == "running" and min(state.rounds_done.values(), default=0) >= n)
        await until(lambda: rounds_done(2), 120)
        await console.handle_line("/sim status p1")
        status = capsys.readouterr().out
        assert re.search(r"4\. run: running · (reddit|twitter) round \d/8", status), status
        assert "4. run: pending" not in status

        await console.handle_line("/sim stop p1")
        stopped = await app.jobs.wait(job.id)
        out = await output_until(capsys, "⏹")
        assert stopped.state == "stopped"
        k = min((await runs.get("p1")).rounds_done.values())
        assert f"⏹ simulation p1 (`{job.id}`) stopped after round {k} of 8 on request; /sim resume p1" in out
        assert "❌" not in out
        assert states_shown(out, job.id)[0] in ("queued", "running")
        assert "queued" not in states_shown(out, job.id)[1:]   # never back to queued once running
        actions = sum((await runs.get("p1")).actions.values())
        assert actions > 0

        await console.handle_line("/sim resume p1")
        resumed = await app.jobs.wait(job.id)
        out = await output_until(capsys, "✅")
        assert resumed.state == "done", resumed.error
        counts = [int(n) for n in re.findall(r"round \d/8[^\n]* · (\d+) actions", out)]
        assert counts and counts[0] >= actions and counts == sorted(counts)   # never back to 0
        assert states_shown(out, job.id)[-1] == "finished"
    finally:
        await app.close()


async def test_status_reads_in_the_channels_language_with_the_running_steps_latest_line(openai_server, tmp_path,
                                                                                        capsys):
    app, console = await console_bot(tmp_path, openai_server.base_url, run_idle_s=0)
    try:
        await app.db.execute(
            "INSERT INTO simulations(id, scope, channel, requirement, spec, folder, created_at)"
            " VALUES ('p2', 'console:local', 'console', 'pedágio?', ?, ?, '2025-01-01')",
            (json.dumps({"documents": [], "requirement": "pedágio?"}), str(tmp_path / "p2")))
        await app.db.execute("INSERT INTO sim_steps(sim_id, step, summary, finished_at) VALUES ('p2', 'ontology', ?,"
                             " 'x')", (json.dumps({"documents": 1, "chars": 900}),))
        await app.db.execute("INSERT INTO sim_steps(sim_id, step, finished_at) VALUES ('p2', 'graph', 'x')")
        with using("pt_BR"):   # a job started from a Portuguese chat reports in Portuguese
            line = step_line("environment", "personas: lote 2/5")
        await app.db.execute(
            "INSERT INTO jobs(id, kind, scope, channel, title, params, state, progress, message, created_at,"
            " updated_at, started_by, owner, language) VALUES ('j2', 'simulation', 'console:local', 'console',"
            " 'simulação p2', '{}', 'running', 0.5, ?, 'x', 'x', '', ?, 'pt_BR')", (line, app.jobs.owner.id))
        await app.db.execute("UPDATE simulations SET job_id='j2' WHERE id='p2'")
        await app.set_setting("console:local", "console", LANGUAGE_SETTING, "pt_BR")   # /settings language pt_BR
        await console.handle_line("/sim status p2")
        status = capsys.readouterr().out
        assert "1. ontologia: concluída" in status and "documentos 1, caracteres 900" in status, status
        assert "3. ambiente: em andamento · personas: lote 2/5\n" in status, status
        assert "4. execução: pendente" in status, status
    finally:
        await app.close()
