"""An ensemble whose runs did not all finish fails with one line that names them and counts the runs
kept, in the chat's language and in agreement with both counts: one run and two runs, in English,
Portuguese and Thai (a failure, and a stop asked by a user)."""
from __future__ import annotations

import pytest

from engine.i18n import using
from engine.jobs import JobError, JobStopped
from engine.sim.ensemble.run import _raise_for

BOOM = RuntimeError("the model went away")
STOP = JobStopped("stopped at round 3")
CASES = {   # which runs ended early, of how many, the error raised, and its line in each language
    "one kept": ({2: BOOM}, 2, JobError, {
        "en": "run 2 of 2 did not finish (the 1 run that finished is kept): the model went away",
        "pt_BR": "a execução 2 de 2 não terminou (1 execução concluída foi mantida): the model went away",
        "th": "การรันที่ 2 จาก 2 ไม่เสร็จ (เก็บการรันที่เสร็จแล้ว 1 รายการไว้): the model went away"}),
    "two kept": ({3: BOOM}, 3, JobError, {
        "en": "run 3 of 3 did not finish (the 2 runs that finished are kept): the model went away",
        "pt_BR": "a execução 3 de 3 não terminou (2 execuções concluídas foram mantidas): the model went away",
        "th": "การรันที่ 3 จาก 3 ไม่เสร็จ (เก็บการรันที่เสร็จแล้ว 2 รายการไว้): the model went away"}),
    "two failed, two kept": ({3: BOOM, 4: BOOM}, 4, JobError, {
        "en": "runs 3, 4 of 4 did not finish (the 2 runs that finished are kept): the model went away",
        "pt_BR": "as execuções 3, 4 de 4 não terminaram (2 execuções concluídas foram mantidas): "
                 "the model went away",
        "th": "การรันที่ 3, 4 จาก 4 ไม่เสร็จ (เก็บการรันที่เสร็จแล้ว 2 รายการไว้): the model went away"}),
    "none kept": ({1: BOOM, 2: BOOM}, 2, JobError, {
        "en": "runs 1, 2 of 2 did not finish: the model went away",
        "pt_BR": "as execuções 1, 2 de 2 não terminaram: the model went away",
        "th": "การรันที่ 1, 2 จาก 2 ไม่เสร็จ: the model went away"}),
    "one stopped, one kept": ({2: STOP}, 2, JobStopped, {
        "en": "run 2 of 2 stopped (the 1 run that finished is kept): stopped at round 3",
        "pt_BR": "a execução 2 de 2 parou (1 execução concluída foi mantida): stopped at round 3",
        "th": "การรันที่ 2 จาก 2 หยุดแล้ว (เก็บการรันที่เสร็จแล้ว 1 รายการไว้): stopped at round 3"}),
    "two stopped, two kept": ({3: STOP, 4: BOOM}, 4, JobStopped, {
        "en": "runs 3, 4 of 4 stopped (the 2 runs that finished are kept): stopped at round 3",
        "pt_BR": "as execuções 3, 4 de 4 pararam (2 execuções concluídas foram mantidas): stopped at round 3",
        "th": "การรันที่ 3, 4 จาก 4 หยุดแล้ว (เก็บการรันที่เสร็จแล้ว 2 รายการไว้): stopped at round 3"}),
}


@pytest.mark.parametrize("language", ["en", "pt_BR", "th"])
@pytest.mark.parametrize("case", CASES)
def test_the_line_counts_the_runs_kept_in_the_chats_language(case, language):
    failed, total, kind, lines = CASES[case]
    with using(language), pytest.raises(JobError) as raised:
        _raise_for(failed, total)
    assert type(raised.value) is kind
    assert str(raised.value) == lines[language]
