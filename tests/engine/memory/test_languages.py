"""The language memory's answers are asked in: a question's own, a short or unclear one the
dominant language of the channel it is asked in, then English; on SQLite and PostgreSQL. What the
LLM is asked (a world's name, beliefs) names that language, and a name written in another is
asked again, then kept."""
from __future__ import annotations

import json

from engine.config import LLMSection
from engine.llm import LLMClient
from engine.memory import extraction, languages
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers.memory import Chat, close_engine, open_engine

PT = ["o jogo de ontem foi ótimo, o Flamengo marcou dois gols",
      "alguém sabe quem conserta o vazamento na garagem do prédio?",
      "a reunião do condomínio ficou para quinta-feira à noite"]
THAI_FOOTBALL = ["เมื่อวานฉันไปดูฟุตบอลที่สนามกับเพื่อน", "ฟุตบอลนัดนี้สนุกมากเลย", "ใครจะไปดูฟุตบอลที่สนามพรุ่งนี้บ้าง"]
TH = ["เมื่อวานฉันไปดูฟุตบอลที่สนามกับเพื่อน", "ท่อน้ำในลานจอดรถของอาคารรั่วอีกแล้ว"]


async def test_a_question_is_answered_in_its_language_else_in_its_channels(db_url):
    db, engine = await open_engine(db_url)
    try:
        chat = Chat()
        await engine.ingest_many([chat.msg(t) for t in PT] + [chat.msg(t, channel="thai") for t in TH])
        scope = chat.scope
        assert await languages.of_question(db, scope, "general", "Quem marcou os gols no jogo de ontem?") == "pt"
        assert await languages.of_question(db, scope, "general", "who scored yesterday?") == "en"
        assert await languages.of_question(db, scope, "thai", "ใครยิงประตู") == "th"
        # too short or unclear to tell (fastText: 0.49 Portuguese, the rest Galician and Spanish):
        # the channel's language, which differs per channel
        unclear = "O que decidimos sobre o vazamento na garagem?"
        assert await languages.of_question(db, scope, "general", unclear) == "pt"
        assert await languages.of_question(db, scope, "general", "Neymar?") == "pt"
        assert await languages.of_question(db, scope, "thai", "Neymar?") == "th"
        # a channel with nothing to tell from, or none given: English
        assert await languages.of_question(db, scope, "empty", "Neymar?") == "en"
        assert await languages.of_question(db, scope, None, "Neymar?") == "en"
    finally:
        await close_engine(db, engine)


def test_messages_are_summarised_in_the_language_most_of_them_are_in():
    assert languages.of_texts(PT + TH[:1]) == "pt"
    assert languages.of_texts(TH + ["ok"]) == "th"
    assert languages.of_texts(["ok", "lol", "555"]) == "en"   # nothing can be told
    assert languages.of_texts([]) == "en"


def thai_world_namer(names: list[str]):
    """Topic names: each request answers the next of ``names``; extraction: nothing."""
    def answer(body: dict):
        system = body["messages"][0]["content"]
        if "name chat topics" in system:
            return json.dumps({"name": names.pop(0) if len(names) > 1 else names[0]})
        return json.dumps({"beliefs": []})
    return answer


async def test_a_thai_world_is_named_in_thai_and_a_name_in_another_language_is_asked_again(db_url):
    naming = ["Football match at the stadium", "ฟุตบอลที่สนาม"]
    with FakeOpenAI(thai_world_namer(naming)) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, extract_every_s=600)
        try:
            chat = Chat()
            await engine.ingest_many([chat.msg(t) for t in THAI_FOOTBALL])
            assert await engine.refresh_topics(chat.scope, every=True) >= 1
            asked = [r for r in server.requests if "name chat topics" in r["messages"][0]["content"]]
            assert asked and asked[0]["messages"][0]["content"].endswith("Answer in Thai.")
            # the English name was asked again with the correction, and the Thai one kept
            assert "written in English, not in Thai as asked" in asked[1]["messages"][-1]["content"]
            assert any(w.topic == "ฟุตบอลที่สนาม" for w in await engine.worlds(chat.scope))
        finally:
            await close_engine(db, engine)
            await llm.close()


async def test_a_name_still_in_another_language_after_the_retries_is_kept(db_url):
    with FakeOpenAI(thai_world_namer(["Football match at the stadium"])) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", validation_retries=1))
        db, engine = await open_engine(db_url, llm=llm, extract_every_s=600)
        try:
            chat = Chat()
            await engine.ingest_many([chat.msg(t) for t in THAI_FOOTBALL])
            await engine.refresh_topics(chat.scope, every=True)
            asked = [r for r in server.requests if "name chat topics" in r["messages"][0]["content"]]
            assert len(asked) == 2   # the answer and one correction, then kept: a name beats none
            assert any(w.topic == "Football match at the stadium" for w in await engine.worlds(chat.scope))
        finally:
            await close_engine(db, engine)
            await llm.close()


def test_beliefs_are_asked_in_the_language_of_their_messages():
    system = extraction.prompt([(1, "ana", PT[0]), (2, "bia", PT[1])], languages.of_texts(PT[:2]))[0]["content"]
    assert system.startswith(extraction.SYSTEM_PROMPT)
    assert "mostly in Brazilian Portuguese" in system and "stays in theirs" in system
