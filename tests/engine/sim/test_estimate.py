"""The estimate shown before a simulation, checked against what real runs of three sizes use:
the whole pipeline through the console chat, against the fake endpoint reporting about four
characters per token (``Metered``), three simulations at once."""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from bot.adapters.console import Console
from bot.app import App
from engine.config import load_config
from engine.sim.environment.models import CONFIG_FILE
from tests.fakes.openai_server import Metered
from tests.fakes.report_responder import PipelineResponder
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE, SIM_FEATURES

# Other towns with other people: each document adds actors of its own to the graph.
RECAST = [{"Valmora": "Ostrava", "Teresa Okafor": "Miriam Adeyemi", "Okafor": "Adeyemi",
           "Meridian Logistics": "Halcyon Freight", "Daniel Reyes": "Tomas Lindqvist", "Reyes": "Lindqvist",
           "Lucia Ferrante": "Paolo Brandt", "Ferrante": "Brandt"},
          {"Valmora": "Kestrel Bay", "Teresa Okafor": "Ingrid Solheim", "Okafor": "Solheim",
           "Meridian Logistics": "Borealis Shipping", "Daniel Reyes": "Victor Amari", "Reyes": "Amari",
           "Lucia Ferrante": "Nadia Petrov", "Ferrante": "Petrov"}]


def documents(tmp_path: Path) -> list[Path]:
    text = SAMPLE.read_text(encoding="utf-8")
    out = [SAMPLE]
    for n, names in enumerate(RECAST):
        recast = text
        for old, new in names.items():
            recast = recast.replace(old, new)
        out.append(tmp_path / f"story{n}.md")
        out[-1].write_text(recast, encoding="utf-8")
    return out


def within(actual: int, estimated: int, share: float = 0.30) -> bool:
    return abs(actual - estimated) <= share * estimated


async def test_estimates_are_within_30_percent_of_real_runs_of_three_sizes(openai_server, embedder, tmp_path,
                                                                          capsys):
    openai_server.responder = Metered(PipelineResponder())
    path = tmp_path / "config.toml"
    # The fake report writer plans two sections: the outline's upper bound says so. The seed fixes
    # who acts in which round: the estimate is an expectation, and a single small run drawn at
    # random strays past 30% now and then (10 agents x 6 rounds: 0.68-1.17 of it over 13 draws,
    # bench/RESULTS.md).
    path.write_text(f'[bot]\ndata_dir = "data"\n[jobs]\nmax_concurrent = 3\n'
                    f'[llm]\nbase_url = "{openai_server.base_url}"\nretry_max_wait_s = 0.05\n'
                    f'[simulation]\nrun_idle_s = 0\nseed = 1\n[report]\nmax_sections = 2\n')
    docs = documents(tmp_path)
    sizes = [(docs[:1], 4, 2), (docs[:2], 10, 6), (docs, 16, 12)]
    app = await App.create(load_config(path), SIM_FEATURES)
    console = app.adapters.add(Console(app, interactive=False))
    await app.start()
    try:
        estimates = {}
        for files, agents, rounds in sizes:
            await console.handle_line(f"/simulate {' '.join(map(str, files))} What happens next? "
                                      f"--agents {agents} --rounds {rounds}")
            out = capsys.readouterr().out
            found = re.search(r"Simulation `(\w+)` started \(job `(\w+)`\).*estimated about ([\d,]+) LLM calls "
                              r"and ([\d,]+) tokens", out)
            assert found, out
            estimates[found[2]] = (int(found[3].replace(",", "")), int(found[4].replace(",", "")))
        done = await asyncio.gather(*(app.jobs.wait(job_id) for job_id in estimates))
        for job in done:
            assert job.state == "done", job.error
            calls, tokens = estimates[job.id]
            used_calls, used_tokens = job.result["llm_calls"], job.result["tokens"]
            assert within(used_calls, calls), (job.title, used_calls, calls)
            assert within(used_tokens, tokens), (job.title, used_tokens, tokens)
            run_config = json.loads((Path(job.result["folder"]) / CONFIG_FILE).read_text(encoding="utf-8"))
            assert run_config["seed"] == 1   # [simulation] seed, not the simulation's id
        # the sizes really differ: the largest run is several times the smallest
        small, large = (estimates[j.id] for j in (done[0], done[-1]))
        assert large[1] > 5 * small[1]
    finally:
        await app.close()


def test_estimates_count_the_stance_calls_per_round_in_batches_and_none_when_tracking_is_off(tmp_path):
    from engine.config import parse_config
    from engine.documents import Document
    from engine.sim.environment.sizing import Sizes
    from engine.sim.estimate import estimate

    docs = [Document(SAMPLE.name, SAMPLE.read_text(encoding="utf-8"))]

    def stance_part(agents: int, rounds: int, **simulation) -> tuple[tuple[int, int], str]:
        config = parse_config({"bot": {"data_dir": str(tmp_path)}, "simulation": simulation})
        cost = estimate(config, docs, "What happens next?", Sizes(agents, rounds))
        assert cost.calls == sum(c for c, _ in cost.steps.values())
        return cost.steps["stance"], cost.describe()

    (calls, tokens), text = stance_part(20, 24)
    assert calls > 0 and tokens > calls * 200
    assert f"(beliefs per round: {calls:,} calls, {tokens:,} tokens)" in text
    # a day of 24 rounds: at most one call per batch of 20 agents per round and platform
    assert calls <= 2 * 24
    smaller, _ = stance_part(20, 24, stance_batch=5)
    more_agents, _ = stance_part(40, 24)
    assert smaller[0] > calls and more_agents[1] > tokens
    assert stance_part(20, 48)[0][0] > calls
    off, text = stance_part(20, 24, track_stances=False)
    assert off == (0, 0) and "beliefs" not in text


def test_an_ensemble_counts_its_runs_once_each_and_the_rest_once(tmp_path):
    from engine.config import parse_config
    from engine.documents import Document
    from engine.sim.environment.sizing import Sizes
    from engine.sim.estimate import estimate

    docs = [Document(SAMPLE.name, SAMPLE.read_text(encoding="utf-8"))]
    config = parse_config({"bot": {"data_dir": str(tmp_path)}})
    one = estimate(config, docs, "What happens next?", Sizes(20, 24))
    five = estimate(config, docs, "What happens next?", Sizes(20, 24, runs=5))
    for step in ("ontology", "graph", "environment", "report"):
        assert five.steps[step] == one.steps[step]
    for step in ("run", "stance"):
        assert five.steps[step] == (5 * one.steps[step][0], 5 * one.steps[step][1])
    assert five.calls == sum(c for c, _ in five.steps.values()) and five.tokens > 4 * one.steps["run"][1]
    run_calls, run_tokens = one.steps["run"]
    assert (f"for 5 runs (each run about {run_calls:,} calls and {run_tokens:,} tokens; steps 1-3 and the report "
            "once)") in five.describe()
    assert "runs" not in one.describe()
