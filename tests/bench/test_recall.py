"""The recall benchmark's own parts, on small handmade cases: its metrics, its baselines, the
LoCoMo reader and the synthetic generator (no model, fast)."""
from __future__ import annotations

import json
import zipfile
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from bench.recall import Bm25Baseline, CosineBaseline, Tally, hit, session_hit, turn_recall
from bench.recall_data import DataError, dialogue_from_locomo, evidence_ids, load_locomo, session_time
from bench.recall_synth import synthetic_chat

SESSIONS = {"D1:1": "1", "D1:2": "1", "D1:3": "1", "D2:1": "2", "D2:2": "2", "D3:1": "3"}


def test_metrics_on_a_handmade_case():
    evidence = ("D1:2", "D2:1")
    assert turn_recall(["D1:2", "D3:1", "D1:1"], evidence) == 0.5
    assert turn_recall(["D2:1", "D1:2"], evidence) == 1.0
    assert turn_recall(["D3:1"], evidence) == 0.0
    assert turn_recall(["D1:2", "D1:2"], evidence) == 0.5      # a turn returned twice counts once
    assert hit(["D3:1", "D2:1"], evidence) == 1.0 and hit(["D1:1"], evidence) == 0.0
    # D1:1 is not evidence but shares session 1 with D1:2; D3:1 shares no session.
    assert session_hit(["D1:1"], evidence, SESSIONS) == 1.0
    assert session_hit(["D3:1"], evidence, SESSIONS) == 0.0
    assert session_hit([], evidence, SESSIONS) == 0.0


def test_tally_averages_over_questions():
    t = Tally()
    t.add(["D1:2", "D3:1"], ("D1:2", "D2:1"), SESSIONS, "1")   # recall 0.5, hit, session hit
    t.add(["D3:1"], ("D2:2",), SESSIONS, "2")                   # nothing
    t.ms += [10.0, 30.0]
    s = t.summary()
    assert s["questions"] == 2 and s["turn_recall"] == 0.25 and s["hit_rate"] == 0.5
    assert s["session_hit"] == 0.5 and s["returned_mean"] == 1.5
    assert s["turn_recall_by_category"] == {"1": 0.5, "2": 0.0}
    assert s["p50_ms"] == 20.0


def test_baselines_rank_what_they_should():
    bm25 = Bm25Baseline(["a", "b", "c"], ["I adopted a cat called Mochi", "the weather is awful",
                                          "my sister is getting married in Porto"])
    assert bm25.top("What is the name of the cat?", 2) == ["a"]     # only matching turns come back
    assert bm25.top("the and of", 3) == []                         # stop words only: nothing to match
    vecs = np.eye(3, dtype=np.float32)
    assert CosineBaseline(["a", "b", "c"], vecs).top(np.array([0.1, 0.9, 0.3], np.float32), 2) == ["b", "c"]


def test_evidence_ids_are_normalised():
    assert evidence_ids(["D1:3", "D8:6; D9:17", "D:11:26", "D30:05", "junk", "D1:3"]) == \
        ["D1:3", "D8:6", "D9:17", "D11:26", "D30:5"]


def locomo_item() -> dict:
    conv = {"speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
                          {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look what I painted",
                           "blip_caption": "a painting of a sunrise over a lake", "img_url": ["x"]}],
            "session_2_date_time": "10:05 am on 25 May, 2023",
            "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "I went to a support group."}],
            "session_3_date_time": "9:00 am on 1 June, 2023"}   # a session time without a session
    qa = [{"question": "What did Melanie paint?", "answer": "a sunrise", "evidence": ["D1:2"], "category": 4},
          {"question": "What is Mel's cat called?", "evidence": ["D1:1"], "category": 5},   # adversarial
          {"question": "When did Caroline go?", "answer": "24 May", "evidence": ["D2:1", "D9:9"], "category": 2},
          {"question": "Where?", "answer": "?", "evidence": [], "category": 1}]
    return {**conv, "qa": qa}


def test_locomo_conversation_becomes_turns_and_questions():
    item = locomo_item()
    d = dialogue_from_locomo("locomo-x", item, item["qa"])
    assert [t.id for t in d.turns] == ["D1:1", "D1:2", "D2:1"]
    assert d.turns[0].ts == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert d.turns[1].ts - d.turns[0].ts == timedelta(seconds=10)
    assert d.turns[1].caption == "a painting of a sunrise over a lake" and d.turns[1].speaker == "Melanie"
    assert d.session_of == {"D1:1": "1", "D1:2": "1", "D2:1": "2"}
    assert [(q.text, q.evidence, q.category) for q in d.questions] == [
        ("What did Melanie paint?", ("D1:2",), "4"), ("When did Caroline go?", ("D2:1",), "2")]
    assert d.dropped == 2
    assert session_time("10:37 AM on 27 June, 2023") == datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)


def test_locomo_reads_zip_folder_and_single_file(tmp_path):
    item = locomo_item()
    folder = tmp_path / "data" / "multimodal_dialog" / "locomo10_v2"
    folder.mkdir(parents=True)
    (folder / "26.json").write_text(json.dumps(item), encoding="utf-8")
    with zipfile.ZipFile(tmp_path / "locomo10.zip", "w") as z:
        z.write(folder / "26.json", "data/multimodal_dialog/locomo10_v2/26.json")
    (tmp_path / "locomo10.json").write_text(json.dumps([{"sample_id": "conv-26", "conversation": {
        k: v for k, v in item.items() if k != "qa"}, "qa": item["qa"]}]), encoding="utf-8")
    for path, name in ((tmp_path / "locomo10.zip", "locomo-26"), (tmp_path / "data", "locomo-26"),
                       (tmp_path / "locomo10.json", "locomo-conv-26")):
        [d] = load_locomo(path)
        assert d.name == name and len(d.turns) == 3 and len(d.questions) == 2
    with pytest.raises(DataError, match="git clone https://github.com/snap-research/locomo"):
        load_locomo(tmp_path / "absent.zip")


def test_synthetic_chat_questions_point_at_turns_that_answer_them():
    d, templates = synthetic_chat(3)
    turns = {t.id: t for t in d.turns}
    assert len({t.channel for t in d.turns}) == 3 and len({t.speaker for t in d.turns}) == 6
    assert set(templates) == set(turns)
    kinds = {q.category for q in d.questions}
    assert kinds == {"fact", "correction", "before", "spread", "date"}
    for q in d.questions:
        assert q.evidence and all(e in turns for e in q.evidence)
        said = [turns[e] for e in q.evidence]
        if q.category == "date":
            # "What did Anna do on 12 March 2024?" -> Anna said "... yesterday" on 13 March.
            asked = datetime.strptime(q.text.split(" on ")[1].rstrip("?"), "%d %B %Y").date()
            assert said[0].ts.date() == asked + timedelta(days=1) and "yesterday" in said[0].text
            assert said[0].speaker == q.text.split(" ")[2]
        if q.category == "spread":
            assert len(said) == 2 and said[0].speaker == said[1].speaker and said[0].ts < said[1].ts
        if q.category == "correction":
            # The correcting turn comes after the same person stated the fact it corrects.
            kind = templates[q.evidence[0]].removesuffix("-fix")
            assert kind != templates[q.evidence[0]]
            assert any(templates[t.id] == kind and t.speaker == said[0].speaker and t.ts < said[0].ts
                       for t in d.turns)
    assert sorted(t.ts for t in d.turns) == [t.ts for t in d.turns]
