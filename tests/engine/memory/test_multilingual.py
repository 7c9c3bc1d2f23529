"""Memory in Portuguese and Thai with the default multilingual model: chats route into a world per
topic, recall finds the right message, and a question in one language finds the answer written
in another."""
from __future__ import annotations

from engine.config import E5_MODEL
from tests.helpers.memory import Chat, close_engine, open_engine

PT_FOOTBALL = ["Que jogo incrível ontem no estádio, o Flamengo venceu por três a um",
               "O atacante marcou dois gols no segundo tempo, que partida",
               "O goleiro defendeu um pênalti no fim do jogo de futebol",
               "O técnico do Flamengo mexeu bem no time durante a partida",
               "A torcida cantou o jogo inteiro no Maracanã"]
PT_GARAGE = ["Tem um vazamento de água na garagem do prédio de novo",
             "O síndico disse que o encanador vem consertar o cano da garagem amanhã",
             "A água do vazamento já molhou três carros no subsolo do condomínio",
             "A administradora do condomínio vai pagar o conserto do encanamento",
             "Coloquei um balde embaixo da infiltração na vaga do meu carro"]
TH_FOOTBALL = ["เมื่อวานดูบอลที่สนาม ทีมเราชนะสามต่อหนึ่ง",
               "กองหน้ายิงสองประตูในครึ่งหลัง เกมสนุกมาก",
               "ผู้รักษาประตูเซฟจุดโทษได้ตอนท้ายเกมฟุตบอล",
               "โค้ชเปลี่ยนตัวผู้เล่นได้ดีมากในเกมนี้",
               "แฟนบอลร้องเพลงเชียร์ทั้งเกมในสนาม"]
TH_GARAGE = ["น้ำรั่วในโรงจอดรถของคอนโดอีกแล้ว",
             "นิติบุคคลบอกว่าช่างประปาจะมาซ่อมท่อในโรงจอดรถพรุ่งนี้",
             "น้ำที่รั่วทำให้รถสามคันในชั้นใต้ดินเปียก",
             "นิติบุคคลจะจ่ายค่าซ่อมท่อน้ำให้",
             "เอาถังไปรองน้ำที่หยดลงมาตรงที่จอดรถของเรา"]
SMALL_TALK = ["bom dia pessoal", "alguém viu a previsão do tempo?", "vou almoçar agora", "kkkk", "valeu!",
              "good morning folks", "anyone up for coffee?", "brb", "สวัสดีตอนเช้า", "ขอบคุณนะ"]


def _majority(worlds: list[str]) -> tuple[str, int]:
    best = max(set(worlds), key=worlds.count)
    return best, worlds.count(best)


async def _routed_and_recalled(db_url, football, garage, question):
    db, engine = await open_engine(db_url, model=E5_MODEL)
    try:
        chat = Chat()
        football_worlds = [(await engine.ingest(chat.msg(t, "ana"))).world_id for t in football]
        garage_worlds = [(await engine.ingest(chat.msg(t, "bia"))).world_id for t in garage]
        (a, n_a), (b, n_b) = _majority(football_worlds), _majority(garage_worlds)
        assert a != b and n_a >= 3 and n_b >= 3, (football_worlds, garage_worlds)
        assert not set(football_worlds) & set(garage_worlds)   # no world mixes the two topics
        result = await engine.recall(chat.scope, question, 3)
        assert result.found
        assert result.evidence[0].text == football[1]
    finally:
        await close_engine(db, engine)


async def test_portuguese_topics_route_apart_and_recall_finds_the_goals(db_url):
    await _routed_and_recalled(db_url, PT_FOOTBALL, PT_GARAGE, "quem marcou gols no segundo tempo?")


async def test_a_short_chat_of_one_person_keeps_the_match_and_the_leak_apart(db_url):
    """The issue's own chat, as one person types it at the console: four lines on a football
    match, then four on a leak in the garage. The garage's first lines must start a world of
    their own, not join the match's (they did with e5's principal directions projected out of
    routing, at every base threshold up to 0.20: bench/RESULTS.md)."""
    match = ["Oi pessoal, alguém viu o jogo do Flamengo ontem?",
             "O Flamengo ganhou de 3 a 1, o Gabigol marcou dois gols",
             "Que jogo! O segundo gol do Gabigol foi lindo", "O juiz anulou um gol do Palmeiras no primeiro tempo"]
    leak = ["Gente, tem um vazamento de água na garagem do prédio",
            "O vazamento na garagem está molhando os carros da vaga 12",
            "O síndico disse que o encanador vem amanhã consertar o cano da garagem",
            "Alguém sabe se a água da garagem vem do apartamento 101?"]
    db, engine = await open_engine(db_url, model=E5_MODEL)
    try:
        chat = Chat()
        match_worlds = [(await engine.ingest(chat.msg(t, "root"))).world_id for t in match]
        leak_worlds = [(await engine.ingest(chat.msg(t, "root"))).world_id for t in leak]
        assert len(set(match_worlds)) == 1 and not set(match_worlds) & set(leak_worlds), (match_worlds, leak_worlds)
    finally:
        await close_engine(db, engine)


async def test_after_a_change_of_topic_the_old_topic_no_longer_pulls_the_new_lines(tmp_path):
    """One person at the console again, a leak told in lines that share few words. The channel's
    context is what it says in its current world: the match's lines, still among the channel's
    last four, no longer pull the leak's second line away from the first's world (before, each
    leak line started a world of its own: bench/RESULTS.md)."""
    match = ["Oi pessoal, alguém viu o jogo do Flamengo ontem?", "Vi sim, o Gabigol marcou dois gols no segundo tempo",
             "O goleiro defendeu um pênalti no final, que jogo!",
             "O Flamengo agora está em primeiro lugar no campeonato"]
    leak = ["Gente, tem um vazamento enorme na garagem do prédio", "A água está pingando em cima dos carros na vaga 12",
            "O síndico disse que o encanador vem amanhã de manhã",
            "Molhou meu carro inteiro, vou pedir reembolso ao condomínio"]
    db, engine = await open_engine(tmp_path / "pt.db", model=E5_MODEL)
    try:
        chat = Chat()
        match_worlds = [(await engine.ingest(chat.msg(t, "root"))).world_id for t in match]
        leak_worlds = [(await engine.ingest(chat.msg(t, "root"))).world_id for t in leak]
        assert len(set(match_worlds)) == 1 and not set(match_worlds) & set(leak_worlds), (match_worlds, leak_worlds)
        assert leak_worlds[1] == leak_worlds[0] and len(set(leak_worlds)) <= 2, leak_worlds
    finally:
        await close_engine(db, engine)


async def test_thai_topics_route_apart_and_recall_finds_the_goals(tmp_path):
    await _routed_and_recalled(tmp_path / "th.db", TH_FOOTBALL, TH_GARAGE, "ใครยิงประตูในครึ่งหลัง")


async def test_a_question_in_one_language_finds_the_answer_in_another(tmp_path):
    """English asked of a Portuguese chat, Portuguese of an English one (e5-small ranks a question's
    own language a little higher, so each chat here is in one language). The answer is among the
    three /recall shows first: "garage" and "garagem" share a stem, so the keyword side ranks the
    other garage message with it."""
    english = ["The team meeting moved to Thursday at ten in the big room",
               "The plumber comes tomorrow to fix the garage pipe", "good morning folks", "anyone up for coffee?",
               "My sister is getting married in October in Lisbon", "The printer on the second floor is broken again"]
    asked = {"portuguese": (PT_FOOTBALL + PT_GARAGE + SMALL_TALK[:5],
                            [("when does the plumber come to fix the pipe in the garage?", PT_GARAGE[1])]),
             "english": (english, [("quando e onde a irmã vai se casar?", english[4])])}
    for told, (texts, questions) in asked.items():
        db, engine = await open_engine(tmp_path / f"{told}.db", model=E5_MODEL)
        try:
            chat = Chat()
            for text in texts:
                await engine.ingest(chat.msg(text))
            for question, answer in questions:
                found = await engine.recall(chat.scope, question, 3)
                assert found.found and answer in [e.text for e in found.evidence[:3]], (question, found.evidence)
        finally:
            await close_engine(db, engine)


async def test_an_unrelated_question_finds_nothing(tmp_path):
    """The relevance floor, calibrated for e5's narrow cosines, still says "nothing" when nothing
    in memory is about the question."""
    db, engine = await open_engine(tmp_path / "floor.db", model=E5_MODEL)
    try:
        chat = Chat()
        for text in PT_FOOTBALL + PT_GARAGE:
            await engine.ingest(chat.msg(text))
        assert not (await engine.recall(chat.scope, "how do I configure a reverse proxy in nginx?", 3)).found
        assert (await engine.recall(chat.scope, "o vazamento na garagem", 3)).found
    finally:
        await close_engine(db, engine)
