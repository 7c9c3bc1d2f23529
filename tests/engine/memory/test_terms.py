"""A message's search tokens in the language it is written in: Thai and Chinese words found inside
text written without spaces, Portuguese words by their stem and without their accents, a line
too short to tell read as English; on SQLite and PostgreSQL alike, through the console."""
from __future__ import annotations

import pytest

from engine.memory.terms import detect_language, dominant_language, index_terms, sure_language
from tests.helpers.search import Member, app, keyword_hits, say_all  # noqa: F401  (app: the console app fixture)

pytestmark = pytest.mark.timeout(180)

THAI = [
    ("Somchai", "เมื่อวานฉันไปดูฟุตบอลที่สนามกับเพื่อน"),          # yesterday I went to watch football at the stadium
    ("Malee", "วันนี้ฝนตกหนักมากที่กรุงเทพ"),                      # it rains heavily in Bangkok today
    ("Somchai", "ท่อน้ำในลานจอดรถของอาคารรั่วอีกแล้ว"),             # the pipe in the building's car park leaks again
    ("Malee", "ฉันชอบกินข้าวผัดกุ้งมากที่สุด"),                      # I like shrimp fried rice best
]
CHINESE = [
    ("Wei", "我昨天和朋友去看足球比赛"),                          # yesterday I watched a football match with friends
    ("Li", "今天北京下了很大的雨"),                               # it rained heavily in Beijing today
    ("Wei", "我们公司的停车场漏水了"),                            # our company's car park is leaking
]


def first_message(reply: str) -> str:
    """The first message /recall shows."""
    lines = reply.splitlines()
    return lines[lines.index("Messages:") + 1]


def test_words_are_indexed_in_the_language_they_are_written_in():
    assert index_terms("os jogos", "pt")[1] == index_terms("o jogo", "pt")[1] == "jog"
    assert index_terms("Não", "pt") == index_terms("nao", "pt")
    assert detect_language("ok") == "en"                 # too short to tell: the default
    assert index_terms("足球比赛", "zh") == ["足球", "比赛", "足球比赛"]


def test_a_text_too_short_to_tell_has_no_sure_language_and_several_have_a_dominant_one():
    assert sure_language("Neymar?") is None and detect_language("Neymar?") == "en"
    assert sure_language(THAI[0][1]) == "th" and sure_language("quando é a reunião?") == "pt"
    assert dominant_language(["Neymar?", "quando é a reunião?", THAI[0][1], "o jogo foi ótimo"]) == "pt"
    assert dominant_language(["Neymar?", "555"]) is None


async def test_thai_and_chinese_words_inside_unsegmented_text_are_found(app):
    await say_all(app, THAI + CHINESE)
    await app.settled()
    asker = Member(app, "Ana")
    # each word is a few letters inside a clause written without spaces
    assert await keyword_hits(app.db, "ฟุตบอล") == [THAI[0][1]]               # football
    assert await keyword_hits(app.db, "ลานจอดรถ") == [THAI[2][1]]             # car park
    assert await keyword_hits(app.db, "足球") == [CHINESE[0][1]]               # football, part of 足球比赛
    assert await keyword_hits(app.db, "北京下雨了吗") == [CHINESE[1][1]]        # did it rain in Beijing?
    assert await keyword_hits(app.db, "ข้าวผัด") == [THAI[3][1]]               # fried rice
    assert THAI[0][1] in first_message(await asker.say("/recall ฟุตบอล"))
    assert CHINESE[2][1] in first_message(await asker.say("/recall 停车场"))


async def test_portuguese_words_are_found_by_their_stem_and_without_accents(app):
    chat = [("Ana", "o jogo de ontem foi ótimo, o Flamengo marcou dois gols"),
            ("Bruno", "alguém sabe quem conserta o vazamento na garagem do prédio?"),
            ("Ana", "as crianças estão brincando no parque")]
    await say_all(app, chat)
    await app.settled()
    assert await keyword_hits(app.db, "jogos") == [chat[0][1]]                # plural finds singular
    assert await keyword_hits(app.db, "predio vazamentos") == [chat[1][1]]    # no accent, plural
    assert (await keyword_hits(app.db, "quem marcou gols?"))[0] == chat[0][1]
    assert chat[1][1] in first_message(await Member(app, "Carla").say("/recall garagens"))
