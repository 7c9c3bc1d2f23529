"""A whole simulation through the CLI against a model that misbehaves: junk and placeholder
answers every 2nd and 3rd time, broken tool calls, one agent whose tool calls are always broken.
The simulation completes, no junk reaches the personas or the environment, the unusable agent
steps are skipped and logged, and the report says how many."""
from __future__ import annotations

import csv
import json

from bot.cli import main
from engine.llm.content_checks import text_problem
from tests.bot.features.simulation.test_entry_points import write_cli_config
from tests.fakes.misbehaving import Misbehaving
from tests.fakes.report_responder import PipelineResponder
from tests.helpers.llm_fixtures import embedder, fake_openai, openai_server  # noqa: F401
from tests.helpers.sim import SAMPLE

JUNK = ("oops", "N/A")


def test_a_simulation_survives_a_misbehaving_model(openai_server, embedder, tmp_path, capsys):
    model = Misbehaving(PipelineResponder(), break_first_agent=True)
    openai_server.responder = model
    cfg = write_cli_config(tmp_path, openai_server)
    with cfg.open("a") as fh:  # every agent acts once in every round
        fh.write("max_steps_per_round = 1\nactivity_by_hour = [" + ", ".join(["10.0"] * 24) + "]\n")
    out = tmp_path / "sim"
    code = main(["--config", str(cfg), "simulate", str(SAMPLE), "-r", "How will the strike end?",
                 "--agents", "5", "--rounds", "2", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    assert model.spoiled["structured"] >= 3 and model.spoiled["tool_call"] >= 4

    # junk was asked again or fell back, never kept
    for name in ("ontology.json", "personas.json", "reddit_profiles.json", "simulation_config.json"):
        text = (out / name).read_text(encoding="utf-8")
        assert not any(j in text for j in JUNK), (name, text[:2000])
    reddit = json.loads((out / "reddit_profiles.json").read_text(encoding="utf-8"))
    with (out / "twitter_profiles.csv").open(encoding="utf-8") as fh:
        twitter = list(csv.DictReader(fh))
    bios = [p["bio"] for p in reddit] + [p["persona"] for p in reddit] + [r["description"] for r in twitter]
    assert bios and all(text_problem(b) is None for b in bios), bios

    # the always-broken agent's steps were tried twice, then skipped and logged; the others' bad
    # tool calls were retried and went through; no round failed
    events = [e for p in ("twitter", "reddit")
              for e in map(json.loads, (out / p / "actions.jsonl").read_text().splitlines())]
    skipped = [e for e in events if e["type"] == "step_skipped"]
    ends = [e for e in events if e["type"] == "round_end"]
    assert len(ends) == 4 and sum(e["llm_steps"] for e in ends) >= 8
    assert len(skipped) >= 2 and len({e["agent_id"] for e in skipped}) == 1
    assert all("not JSON" in e["reason"] for e in skipped)
    broken_requests = sum(1 for r in openai_server.requests if r.get("tools") and
                          r["messages"][0].get("content") == model.broken_agent)
    assert broken_requests == 2 * len(skipped)   # each skipped step was tried twice
    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert f"{len(skipped)} agent step{'s were' if len(skipped) > 1 else ' was'} skipped" in report
