"""An ensemble's "Across the runs" section as the report's reader reads it, in the report's
language, while what the report agent is told of it (its context line, the ensemble_runs tool)
stays English."""
from __future__ import annotations

from pathlib import Path

from engine.i18n import using
from engine.sim.context import SimSpec
from engine.sim.ensemble.report import Ensemble
from engine.sim.ensemble.spread import run_beliefs, spread
from engine.sim.records import SimRecord
from engine.sim.report.agent import ensemble_note
from engine.sim.stance.tracking import RoundSplit

AGAINST = [(3, 3, 2), (2, 3, 3), (1, 2, 5), (1, 1, 6)]      # for, neutral, against per round, 8 agents
FOR = [(3, 3, 2), (4, 2, 2), (5, 2, 1), (6, 1, 1)]


def ensemble(tmp_path: Path) -> Ensemble:
    spec = SimSpec([], "Will the tenants accept the new garage rules?", runs=3)
    records = [SimRecord(f"h-r{k}", "test:1", None, None, spec.requirement, spec, tmp_path / f"r{k}", "2026-01-01",
                         ensemble_of="h", run_no=k) for k in (1, 2, 3)]
    beliefs = []
    for k, rounds in ((1, AGAINST), (2, AGAINST), (3, FOR)):
        splits = [RoundSplit("twitter", r, f, n, a, round((f - a) / 8, 3)) for r, (f, n, a) in enumerate(rounds, 1)]
        beliefs.append(run_beliefs(k, f"h-r{k}", splits, []))
    head = SimRecord("h", "test:1", None, None, spec.requirement, spec, tmp_path, "2026-01-01")
    return Ensemble(head, records, spread(3, beliefs))


def test_the_section_reads_in_the_reports_language(tmp_path):
    ens = ensemble(tmp_path)
    english = ens.section()
    assert english.startswith("**2 of 3 runs: most agents against by round 3")
    assert "- Runs: 3, the same agents and documents" in english and "Outlier run 3 ends for" in english
    with using("pt_BR"):
        pt = ens.section()
    assert pt.startswith("**2 de 3 execuções: a maioria dos agentes contra desde a rodada 3")
    assert "- Execuções: 3, com os mesmos agentes e documentos" in pt and "2 execuções terminam contra, 1 a favor" in pt
    assert "| rodada | execuções | a favor | neutro | contra | pontuação média |" in pt
    assert "A maioria (execuções 1, 2) termina contra" in pt and "A execução discrepante 3 termina a favor" in pt
    with using("th"):
        th = ens.section()
    assert th.startswith("**2 จาก 3 การรัน: เอเจนต์ส่วนใหญ่ไม่เห็นด้วยตั้งแต่รอบที่ 3")
    assert "การรันที่แตกแถว 3 จบแบบเห็นด้วย" in th and "Runs:" not in th


def test_what_the_report_agent_is_told_stays_english(tmp_path):
    ens = ensemble(tmp_path)
    line = ens.spread.confidence_line()
    for language in ("pt_BR", "th"):
        with using(language):
            assert f"Across the runs: {line} Call ensemble_runs" in ensemble_note(ens)
            assert ens.tool_result(0, 1, lambda *_: None)["confidence"] == line
