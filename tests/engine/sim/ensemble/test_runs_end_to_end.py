"""An ensemble end to end on camel-oasis, whose outcome is known before it starts.

`python -m bot simulate --runs 3` (the CLI, in this process) against a seeded fake model: every
agent request carries its run's seed, and the fake's agents support the plan in run 2 and oppose it
in runs 1 and 3 (tests/fakes/ensemble_responder.py). One module-scoped ensemble (three small real
runs, in parallel) serves every check: the seeds, the parallel runs, the cost counted on one job,
the one report over all runs with its confidence line, and then, through the console bot,
/sim status, /compare (an ensemble against an ensemble's run), /report ask (its tools see all
runs), the exports (a run column) and /sim fork (the median-most run by default, and said so).
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from types import SimpleNamespace

import pytest

from bot.app import App
from bot.cli import main
from bot.neutral import Incoming
from engine.config import load_config
from engine.sim.ensemble.members import run_seed
from tests.fakes.ensemble_responder import EnsembleResponder
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.chat import Outlet, RecordingReply
from tests.helpers.config import llm, write_config
from tests.helpers.sim import SAMPLE, SIM_FEATURES
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(600)

SEED = 11
REQUIREMENT = "Will Valmora accept the port automation?"


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ensemble")
    with FakeOpenAI() as server:
        responder = EnsembleResponder(supporting={run_seed(SEED, 2)})
        server.responder = responder
        cfg = write_config(tmp, {"llm": llm(server), "jobs": {"progress_interval_s": 0.0},
                                 "simulation": {"seed": SEED, "parallel_runs": 3, "run_idle_s": 5.0}})
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--config", str(cfg), "simulate", str(SAMPLE), "-r", REQUIREMENT, "--agents", "4",
                         "--rounds", "3", "--runs", "3", "--out", str(tmp / "sim")])
        assert code == 0, err.getvalue()[-3000:]
        head = re.search(r"^simulation (\w+):", out.getvalue(), re.M)[1]
        yield SimpleNamespace(server=server, responder=responder, config=cfg, folder=tmp / "sim", head=head,
                              out=out.getvalue(), err=err.getvalue())


@pytest.fixture
async def bot(ensemble):
    app = await App.create(load_config(ensemble.config), SIM_FEATURES)
    reply = RecordingReply()
    app.adapters.add(Outlet("console", lambda scope, channel: reply))
    await app.start()
    app.reply = reply
    yield app
    await app.close()


async def ask(app, text: str) -> list[str]:
    """What the bot sent in answer to ``text`` typed by an administrator at the console."""
    before = len(app.reply.log)
    msg = Incoming("console", "console:local", "console", "u1", "admin", text, is_admin=True)
    await app.dispatch(msg, app.reply)
    return [entry[1] for entry in app.reply.log[before:] if entry[0] == "send"]


def test_three_runs_with_their_own_seeds_in_parallel(ensemble):
    seeds = {run_seed(SEED, k) for k in (1, 2, 3)}
    assert run_seed(SEED, 1) == SEED and len(seeds) == 3
    assert set(ensemble.responder.agents.seen) == seeds          # every agent request carried its run's seed
    spans = list(ensemble.responder.agents.seen.values())
    assert max(first for first, _ in spans) < min(last for _, last in spans)   # the runs overlapped
    for k in (1, 2, 3):
        run = ensemble.folder / "runs" / str(k)
        config = json.loads((run / "simulation_config.json").read_text())
        assert config["sim_id"] == f"{ensemble.head}-r{k}" and config["seed"] == run_seed(SEED, k)
        assert (run / "ontology.json").read_text() == (ensemble.folder / "ontology.json").read_text()  # shared
        assert (run / "twitter" / "twitter.db").exists() and (run / "reddit" / "reddit.db").exists()
    assert "1 document(s), 4 agents" in ensemble.err and ", 3 runs; estimated about" in ensemble.err
    assert "for 3 runs (each run about" in ensemble.err
    assert f"runs: 1 {ensemble.head}-r1, 2 {ensemble.head}-r2, 3 {ensemble.head}-r3" in ensemble.out
    assert "run: runs=3, rounds=3" in ensemble.out


def test_the_answer_is_the_runs_agreement(ensemble):
    confidence = re.search(r"^confidence: (.+)$", ensemble.out, re.M)[1]
    assert re.fullmatch(r"2 of 3 runs: most agents against by round \d \(against: [\d%–]+ of agents in those "
                        r"runs\); 1 run ended for\.", confidence), confidence
    report = (ensemble.folder / "report" / "report.md").read_text()
    summary = (ensemble.folder / "report" / "summary.txt").read_text()
    assert summary.startswith(f"🎯 {confidence}")
    assert "## Across the 3 runs" in report and f"**{confidence}**" in report
    assert "2 runs end against, 1 for" in report and "Outlier run 2 ends for" in report
    assert "- The majority (runs 1, 3) ends against" in report
    assert "| round | runs | for | neutral | against | mean score |" in report
    for chart in ("ensemble_beliefs", "ensemble_runs", "ensemble_activity"):
        path = ensemble.folder / "report" / "charts" / f"{chart}.png"
        assert f"(charts/{chart}.png)" in report and path.read_bytes()[:4] == b"\x89PNG"
    # the writer saw every run through ensemble_runs, and its citation of another run is verified
    cited = re.search(r"In run (\d), which ends \w+, @\w+ wrote the most engaged post (\[run \d \w+ post \d+\])",
                      report)
    assert cited, report
    sources = report.split("## Sources", 1)[1]
    assert f"- {cited[2]} @" in sources and "(not returned by any tool)" not in sources


async def test_one_job_pays_for_every_run(ensemble, bot):
    head = await bot.sims.get(ensemble.head)
    job = await bot.sims.job_of(head)
    assert job.state == "done" and head.runs == 3
    runs = await bot.sims.members(head)
    assert [r.run_no for r in runs] == [1, 2, 3] and all(r.ensemble_of == head.id for r in runs)
    steps = [await bot.sims.completed_steps(r.id) for r in runs]
    assert all(s["run"]["llm_calls"] > 0 and s["environment"]["llm_calls"] == 0 for s in steps)
    usage = await bot.llm.job_usage(job.id)
    shared = await bot.sims.completed_steps(head.id)
    # one job holds the runs' agents and steps 1-3 (and the stances and the report besides)
    assert usage.calls > sum(s["run"]["llm_calls"] for s in steps) + sum(
        shared[name]["llm_calls"] for name in ("ontology", "graph", "environment"))
    assert shared["run"]["llm_calls"] == usage.calls - sum(shared[n]["llm_calls"] for n in shared if n != "run")


async def test_status_compare_ask_export_and_fork_understand_the_ensemble(ensemble, bot):
    head = ensemble.head
    status = "\n".join(await ask(bot, f"/sim status {head}"))
    assert "runs: 3" in status and f"• run 2 `{head}-r2`: completed" in status
    assert "🎯 2 of 3 runs: most agents against" in status
    listed = "\n".join(await ask(bot, "/sims"))
    assert f"`{head}` done · 5/5 steps · 3 runs" in listed and f"`{head}-r" not in listed

    # an ensemble against one of its runs (the outlier)
    sent = await ask(bot, f"/compare {head} {head}-r2")
    job = (await bot.jobs.list(scope="console:local", kind="compare"))[0]
    assert (await bot.jobs.wait(job.id)).state == "done"
    summary = next(t for t in bot.reply.log[len(sent):] if t[0] == "send" and "Comparison of" in t[1])[1]
    assert f"A `{head}` (ensemble of 3 runs): 2 of 3 runs: most agents against" in summary
    assert (f"B `{head}-r2` (one run): One run: most agents for by round 1 (100% of agents); one run is one "
            "draw") in summary
    assert "the difference between the sides is within their own spread" in summary   # B is one of A's runs
    images = [entry[1].name for entry in bot.reply.log if entry[0] == "image"]
    assert "ensembles.png" in images

    # report chat: the agent is offered every run
    before = len(ensemble.server.requests)
    await ask(bot, f"/report {head} ask Which run disagrees?")
    offered = [{t["function"]["name"] for t in body.get("tools") or []} for body in ensemble.server.requests[before:]]
    assert any("ensemble_runs" in tools for tools in offered)

    # exports: every run, with a run column
    await ask(bot, f"/report {head} export")
    with (ensemble.folder / "export" / "trajectory.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["run"] for r in rows} == {"1", "2", "3"} and len(rows) == 3 * 3 * 2
    transcript = (ensemble.folder / "export" / "transcript.md").read_text()
    assert "# Run 1 (`" in transcript and "# Run 3 (`" in transcript and "### Round 1" in transcript

    # a fork starts from the median-most run unless told otherwise
    text = "\n".join(await ask(bot, f"/sim fork {head} --from-round 2"))
    assert (f"forked from run 1 of `{head}` (`{head}-r1`, the median-most of its 3 runs; --run K picks another) "
            "after round 2") in text, text
    fork_id = re.search(r"Simulation `(\w+)` ⑂", text)[1]
    fork = await bot.sims.get(fork_id)
    assert fork.parent_id == f"{head}-r1" and fork.runs == 1
    text = "\n".join(await ask(bot, f"/sim fork {head} --from-round 2 --run 2"))
    assert f"forked from run 2 of `{head}` (`{head}-r2`) after round 2" in text, text
    assert "has runs 1 to 3: there is no run 7" in "\n".join(await ask(bot, f"/sim fork {head} --from-round 2 --run 7"))
    for job in await bot.jobs.list(scope="console:local", kind="simulation"):
        if job.state in ("queued", "running"):
            await bot.jobs.cancel(job.id)
            await until(lambda j=job: _finished(bot, j.id), 60, "the fork's job to end")


async def _finished(app, job_id: str) -> bool:
    return (await app.jobs.get(job_id)).state not in ("queued", "running")
