"""Language codes as people type them, and the English names prompts ask for them by."""
from __future__ import annotations

from engine import language


def test_codes_as_people_type_them_become_one_canonical_code():
    assert [language.normalize(c) for c in ("pt", "pt_br", "PT-br", "pt-BR")] == ["pt-BR"] * 4
    assert language.normalize("pt-PT") == "pt-PT"          # a country given is kept
    assert language.normalize("TH") == "th" and language.normalize("zh-hant") == "zh-Hant"
    assert [language.normalize(c) for c in ("xx", "Thai", "", "   ", None, "pt-XX", "123")] == [None] * 7


def test_prompts_name_the_language_in_english():
    assert language.answer_in("pt") == "Answer in Brazilian Portuguese."   # the detector's bare code
    assert language.answer_in("pt-PT") == "Answer in European Portuguese."
    assert language.answer_in("th") == "Answer in Thai."
    assert language.answer_in("xx") == language.answer_in(None) == "Answer in English."
    assert language.describe("pt") == "Brazilian Portuguese (pt-BR)"
    assert language.known("ja") and not language.known("klingon")


def test_a_text_is_in_another_language_only_when_the_detector_is_sure_of_it():
    english = "The garage leak will be fixed on Thursday by the plumber."
    assert language.other_than(english, "pt-BR") == "en"
    assert language.other_than("O vazamento na garagem será consertado na quinta-feira.", "pt-BR") is None
    assert language.other_than("O vazamento na garagem será consertado na quinta-feira.", "pt") is None
    assert language.other_than("ท่อน้ำในลานจอดรถของอาคารรั่วอีกแล้ว", "th") is None
    assert language.other_than("Neymar!", "th") is None          # too short to tell
    assert language.other_than(english, "en") is None
