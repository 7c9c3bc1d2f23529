"""The spread of an ensemble's beliefs on runs whose outcome is known: per-run splits written by
hand, and what the runs say together (bands, ends, parting round, majority and outliers, the
median-most run, the confidence line)."""
from __future__ import annotations

import pytest

from engine.i18n import english, using
from engine.sim.ensemble.spread import camp_of, combine, parting_round, run_beliefs, settled_round, spread
from engine.sim.stance.tracking import RoundSplit

AGAINST = [(3, 3, 2), (2, 3, 3), (1, 2, 5), (1, 1, 6)]      # for, neutral, against per round, 8 agents
AGAINST_LATE = [(3, 3, 2), (3, 2, 3), (2, 3, 3), (1, 2, 5)]
FOR = [(3, 3, 2), (4, 2, 2), (5, 2, 1), (6, 1, 1)]


def run(k: int, rounds: list[tuple[int, int, int]], finals: dict[int, float] | None = None):
    """Run ``k``: its split per round on one platform; agents' final scores as given."""
    splits = [RoundSplit("twitter", r, f, n, a, round((f - a) / (f + n + a), 3))
              for r, (f, n, a) in enumerate(rounds, 1)]
    scores = [("twitter", len(rounds), agent, score) for agent, score in (finals or {}).items()]
    return run_beliefs(k, f"h-r{k}", splits, scores)


def test_four_of_five_against_with_one_outlier():
    runs = [run(1, AGAINST, {0: -0.6, 1: -0.5}), run(2, AGAINST, {0: -0.5, 1: -0.4}),
            run(3, FOR, {0: 0.7, 1: -0.4}), run(4, AGAINST_LATE, {0: -0.7, 1: -0.5}),
            run(5, AGAINST, {0: -0.6, 1: -0.6})]
    s = spread(5, runs)
    assert s.ends == {1: "against", 2: "against", 3: "for", 4: "against", 5: "against"}
    assert s.majority == "against" and s.agreeing == [1, 2, 4, 5] and s.outliers == [3]
    # a tie between the largest camps leads no side: AGAINST leads from round 3, AGAINST_LATE from 4
    assert s.settled == {1: 3, 2: 3, 3: 2, 4: 4, 5: 3}
    # "by round 4": the round by which every agreeing run held its camp, not the earliest of them
    assert s.confidence_line() == ("4 of 5 runs: most agents against by round 4 (against: 62–75% of agents in "
                                   "those runs); 1 run ended for.")
    assert s.ends_line() == "4 runs end against, 1 for"
    assert s.parting == 2          # round 1 alike everywhere; in round 2 the outlier leads for
    last = s.bands[-1]
    assert (last.round, last.runs) == (4, 5)
    assert last.median["against"] == pytest.approx(6 / 8) and last.low["against"] == pytest.approx(1 / 8)
    assert last.high["for"] == pytest.approx(6 / 8) and last.median["for"] == pytest.approx(1 / 8)
    assert s.shifts[0] == (0, -0.6, 0.7)                     # agent 0 turned for in the outlier
    assert s.representative in (1, 2, 5)


def test_all_agree_and_most_agents():
    strong = [(0, 1, 7)] * 3
    s = spread(3, [run(k, strong) for k in (1, 2, 3)])
    assert s.confidence_line() == "All 3 runs: most agents against by round 1 (against: 88% of agents in those runs)."
    assert s.outliers == [] and s.parting is None


def test_no_majority_says_the_forecast_is_uncertain():
    s = spread(4, [run(1, AGAINST), run(2, FOR), run(3, AGAINST_LATE), run(4, FOR)])
    assert s.majority is None
    assert s.confidence_line() == "No outcome in most runs: 2 runs end against, 2 for; the forecast is uncertain."


def test_few_runs_and_untracked_runs_are_said():
    s = spread(3, [run(1, AGAINST), run(2, AGAINST), run_beliefs(3, "h-r3", [], [])])
    line = s.confidence_line()
    assert line.startswith("All 2 runs: most agents against by round 3 (against: 75% of agents in those runs).")
    assert "With only 2 runs, this is a weak signal." in line and "(1 run without classified beliefs left out.)" in line
    assert spread(2, []).confidence_line() == "No confidence line: beliefs were not tracked in any of the 2 runs."


def test_a_single_run_is_one_draw():
    s = spread(1, [run(1, FOR)])
    assert s.confidence_line() == ("One run: most agents for by round 2 (75% of agents); one run is one draw, "
                                   "not a spread.")
    close = spread(1, [run(1, [(4, 2, 2), (3, 3, 2)])])     # ends on a tie between for and neutral: no side
    assert close.confidence_line().startswith("One run: the largest camp neutral or undecided by round 2 (38%")


def test_where_runs_part():
    # identical runs never part; a camp's share apart by more than a quarter parts them
    assert parting_round([run(1, AGAINST), run(2, AGAINST)]) is None
    wide = [(4, 0, 4), (4, 0, 4), (1, 0, 7)]
    narrow = [(4, 0, 4), (2, 0, 6), (1, 0, 7)]
    assert parting_round([run(1, wide), run(2, narrow)]) == 2
    assert parting_round([run(1, AGAINST), run(2, FOR)]) == 2      # leading camps differ from round 2


def test_the_camps_and_their_ties():
    assert camp_of(combine([RoundSplit("twitter", 1, 2, 1, 2, 0.0)])[1]) == "neutral"   # no side ahead
    both = combine([RoundSplit("twitter", 1, 1, 0, 3, -0.5), RoundSplit("reddit", 1, 3, 0, 0, 0.6)])[1]
    assert (both.for_, both.against, both.mean) == (4, 3, pytest.approx(-0.029, abs=1e-3))   # weighted by agents
    assert settled_round(run(1, FOR)) == 2 and settled_round(run_beliefs(1, "x", [], [])) is None


def test_the_line_reads_in_the_chats_language_and_its_prompt_copy_in_english():
    s = spread(5, [run(1, AGAINST), run(2, AGAINST), run(3, FOR), run(4, AGAINST_LATE), run(5, AGAINST)])
    english_line = s.confidence_line()
    with using("pt_BR"):
        assert s.confidence_line() == ("4 de 5 execuções: a maioria dos agentes contra desde a rodada 4 (contra: "
                                       "62–75% dos agentes nessas execuções); 1 execução terminou a favor.")
        assert s.ends_line() == "4 execuções terminam contra, 1 a favor"
        assert english(s.confidence_line) == english_line
    with using("th"):
        assert s.confidence_line() == ("4 จาก 5 การรัน: เอเจนต์ส่วนใหญ่ไม่เห็นด้วยตั้งแต่รอบที่ 4 (ไม่เห็นด้วย: 62–75% "
                                       "ของเอเจนต์ในการรันเหล่านั้น); 1 การรันจบแบบเห็นด้วย")
        assert english(s.confidence_line) == english_line
    few = spread(3, [run(1, FOR), run(2, FOR), run_beliefs(3, "h-r3", [], [])])
    with using("pt_BR"):
        assert few.confidence_line() == ("Todas as 2 execuções: a maioria dos agentes a favor desde a rodada 2 "
                                         "(a favor: 75% dos agentes nessas execuções). Com apenas 2 execuções, este é "
                                         "um sinal fraco. (1 execução sem crenças classificadas deixada de fora.)")
    with using("th"):
        assert spread(1, [run(1, FOR)]).confidence_line() == (
            "การรันเดียว: เอเจนต์ส่วนใหญ่เห็นด้วยตั้งแต่รอบที่ 2 (75% ของเอเจนต์) การรันเดียวคือการสุ่มครั้งเดียว ไม่ใช่การกระจาย")
