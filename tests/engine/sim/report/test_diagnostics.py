"""Quality diagnostics and the belief split: the maths on synthetic rows, and one real run whose
agents stay silent (the fake model answers without tool calls) diagnosed as such."""
from __future__ import annotations

import asyncio
import math

import pytest

from engine.config import LLMSection
from engine.db import open_database
from engine.llm import LLMClient
from engine.sim.report import diagnostics
from engine.sim.report.diagnostics import (
    RunFacts,
    convergence_round,
    cross_platform,
    diagnose,
    entropy,
)
from engine.sim.run.executor import LocalExecutor
from engine.sim.run.service import LLMTarget, RunSettings, SimRuns
from engine.sim.stance import tracking as stance
from engine.sim.stance.tracking import RoundSplit
from tests.fakes.openai_server import FakeOpenAI, completion
from tests.fakes.stance_responder import WithStances
from tests.helpers.sim import make_sim_folder

pytestmark = pytest.mark.timeout(240)


def split(rnd: int, f: int, n: int, a: int, platform: str = "twitter") -> RoundSplit:
    return RoundSplit(platform, rnd, f, n, a, 0.0)


def test_entropy_is_0_for_one_camp_and_1_for_an_even_split():
    assert entropy(5, 0, 0) == 0.0 and entropy(0, 0, 0) == 0.0
    assert entropy(3, 3, 3) == pytest.approx(1.0)
    assert entropy(2, 2, 0) == pytest.approx(1 / math.log2(3))


def test_convergence_is_the_first_round_after_which_the_split_stays_put():
    moving_then_still = [split(1, 5, 5, 0), split(2, 2, 3, 5), split(3, 2, 4, 4), split(4, 2, 4, 4)]
    assert convergence_round(moving_then_still) == 2
    assert convergence_round(moving_then_still[:2]) is None        # still moving at the end
    assert convergence_round([split(1, 4, 4, 2), split(2, 4, 4, 2)]) == 1
    assert convergence_round([split(1, 4, 4, 2)]) is None           # one round: nothing to compare
    # it moved again after settling once: the later settling counts
    assert convergence_round([split(1, 5, 0, 0), split(2, 5, 0, 0), split(3, 0, 0, 5), split(4, 0, 0, 5)]) == 3
    # shares, not counts: the same split of more agents has not moved
    assert convergence_round([split(1, 2, 2, 0), split(2, 4, 4, 0)]) == 1


def test_cross_platform_counts_agents_on_both_and_compares_their_latest_labels():
    acted = {"twitter": {1, 2, 3}, "reddit": {2, 3, 4}}
    scores = [("twitter", 1, 2, 0.9), ("twitter", 2, 2, -0.5), ("reddit", 1, 2, -0.8),   # 2: against on both
              ("twitter", 1, 3, 0.5), ("reddit", 2, 3, 0.0),                            # 3: for / neutral
              ("twitter", 1, 1, 0.4)]
    assert cross_platform(acted, scores) == (2, 2, 1)
    assert cross_platform({"twitter": {1}}, scores[:1]) == (0, 0, 0)


def facts(agents: int = 20, steps: int = 200, actions: int = 180, skipped: int = 0, rounds: int = 12) -> RunFacts:
    everyone = set(range(agents))
    return RunFacts(agents={"twitter": everyone, "reddit": everyone}, acted={"twitter": everyone, "reddit": everyone},
                    actions={"twitter": actions}, steps={"twitter": steps}, skipped={"twitter": skipped},
                    rounds={"twitter": rounds, "reddit": rounds})


def contested(rounds: int = 12) -> list[RoundSplit]:
    return [split(r, 7, 6, 7, p) for p in ("twitter", "reddit") for r in range(1, rounds + 1)]


def test_the_verdict_names_what_to_change():
    good = diagnose(facts(), contested(), [])
    assert good.verdict.startswith("Health: good") and good.participation == 1.0
    consensus = diagnose(facts(), [split(r, 19, 1, 0, p) for p in ("twitter", "reddit") for r in range(1, 13)], [])
    assert "near-consensus from round 1 on" in consensus.verdict and "a more contested requirement" in consensus.verdict
    skipping = diagnose(facts(skipped=80), contested(), [])
    assert "40% of agent steps were skipped" in skipping.verdict and "a better model" in skipping.verdict
    small = diagnose(facts(agents=3, rounds=2), contested(2), [])
    assert small.verdict.startswith("Health: weak") and "more rounds, more agents" in small.verdict
    untracked = diagnose(facts(), [], [])
    assert "no beliefs were tracked" in untracked.verdict


def test_the_verdict_and_the_section_read_in_the_report_jobs_language():
    from engine.i18n import using
    from engine.sim.report.diagnostics import markdown

    with using("pt_BR"):
        small = diagnose(facts(agents=3, rounds=2, skipped=80), contested(2), [])
        text = markdown(small, contested(2))
    assert small.verdict == ("Saúde: ruim: 40% das etapas de agente foram puladas ou falharam; execução de apenas 2 "
                             "rodadas; participação de apenas 3 agentes. Tente um modelo melhor (ou um endpoint "
                             "acessível e menos sobrecarregado), mais rodadas, mais agentes.")
    assert text.startswith("| plataforma | rodada | a favor | neutro | contra | média | entropia |")
    assert "- Etapas puladas ou com falha: 80 de 200 (40%)." in text
    with using("th"):
        assert diagnose(facts(), contested(), []).verdict.startswith("สุขภาพของการรัน: ดี")


async def test_the_split_and_the_status_line_come_from_the_rows(db):
    rows = [("s", "twitter", 1, 0, 0.5, "for"), ("s", "twitter", 1, 1, -0.1, "neutral"),
            ("s", "twitter", 2, 0, 0.9, "for"), ("s", "twitter", 2, 1, -0.6, "against"),
            ("s", "reddit", 2, 1, -0.3, "against"), ("other", "twitter", 2, 5, 1.0, "for")]
    await db.executemany("INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label)"
                         " VALUES (?,?,?,?,?,?)", rows)
    splits = await stance.split_by_round(db, "s")
    assert splits == [RoundSplit("reddit", 2, 0, 0, 1, pytest.approx(-0.3)),
                      RoundSplit("twitter", 1, 1, 1, 0, pytest.approx(0.2)),
                      RoundSplit("twitter", 2, 1, 0, 1, pytest.approx(0.15))]
    assert await stance.beliefs_line(db, "s") == ("beliefs after round 2: twitter 1 for · 0 neutral · 1 against; "
                                                  "reddit 0 for · 0 neutral · 1 against")
    assert await stance.beliefs_line(db, "nothing") is None
    assert [stance.label_of(x) for x in (0.21, 0.2, -0.2, -0.21)] == ["for", "neutral", "neutral", "against"]


# -- one real run whose agents never call a tool ----------------------------------------------

def silent(body: dict):
    """A model that answers every agent step with words instead of a tool call."""
    return completion("I read the feed and have nothing to add.")


@pytest.fixture(scope="module")
def silent_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("silent")
    folder, path = base / "sim", base / "run.sqlite3"
    make_sim_folder(folder, agents=4, rounds=2, sim_id="quiet", everyone_everywhere=True)

    async def go() -> None:
        with FakeOpenAI(WithStances(silent)) as server:
            db = await open_database(path)
            llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", retry_max_wait_s=0.05), db)
            runs = SimRuns(db, LocalExecutor(kill_grace=3.0), LLMTarget(server.base_url, "fake-model"),
                           RunSettings(idle_s=0.0, progress_interval_s=0.2), observers=[stance.observer(db, llm)])

            async def progress(*_args, **_kwargs) -> None:
                pass

            try:
                await runs.run("quiet", folder, progress, job_id="job-quiet", scope="console:local")
            finally:
                await runs.executor.close()
                await runs.close()
                await llm.close()
                await db.close()

    asyncio.run(go())
    return folder, path


async def test_a_run_of_silent_agents_is_diagnosed_as_such(silent_run, tmp_path):
    folder, path = silent_run
    db = await open_database(path)
    try:
        charts, text = await diagnostics.report_section(db, "quiet", folder, tmp_path / "charts")
        splits = await stance.split_by_round(db, "quiet")
        scores = await stance.agent_scores(db, "quiet")
    finally:
        await db.close()
    found = diagnose(diagnostics.read_facts(folder), splits, scores)
    assert found.steps >= 4 * 2 * 2 - 2 and found.actions == 2   # only agent 0's scheduled first post, twice
    assert found.acted == 1 and found.participation == 0.25
    assert found.verdict.startswith("Health: poor: the agents stayed mostly silent")
    assert "a better model (one that answers with tool calls)" in found.verdict
    assert f"**{found.verdict}**" in text and "Participation: 1 of 4 agents acted (25%)" in text
    # beliefs: only the agent that posted was classified, in round 1, on both platforms
    assert {(s.platform, s.round, s.total) for s in splits} == {("twitter", 1, 1), ("reddit", 1, 1)}
    assert set(charts) == {"beliefs", "belief_replay"}
