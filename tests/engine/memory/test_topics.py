"""Topic names read as a short phrase: stop words and contractions out, one word per stem, words
said side by side kept in their order, consistent capitals; each message read in its own language
(a Portuguese, Thai or Chinese chat's names without that language's stop words, unspaced scripts
joined)."""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path

import chatterbot_corpus
import snowballstemmer
import yaml

from bot.app import App
from engine.config import LLMSection, parse_config
from engine.llm import LLMClient
from engine.memory import terms
from engine.memory.models import WorldState
from engine.memory.textutil import stop_words
from engine.memory.topics import NAME_SETTLED_AT, NAME_STOP, initial_topic, keyword_topics, needs_topic
from tests.fakes.openai_server import FakeOpenAI, Raw, completion
from tests.helpers.chat import Person
from tests.helpers.config import MINILM
from tests.helpers.memory import Chat, close_engine, open_engine
from tests.helpers.pg_server import restartable_pg  # noqa: F401  (the fixture)
from tests.helpers.search import Member, app, say_all  # noqa: F401  (app: the console app fixture)

CORPUS = Path(chatterbot_corpus.__file__).parent / "data" / "english"
STEM = snowballstemmer.stemmer("english")


def reads_as_a_phrase(name: str) -> None:
    words = name.split()
    assert name[0].isupper() and "·" not in name and "'" not in name, name
    assert not [w for w in words if w.lower() in NAME_STOP], name
    assert len({STEM.stemWord(w.lower()) for w in words}) == len(words), name  # no plural twice


def test_provisional_names_drop_auxiliaries_and_contractions_and_keep_proper_nouns():
    assert initial_topic("did you see the football match? Arsenal won") == "Football match arsenal won"
    assert initial_topic("I've been training for the Berlin marathon") == "Training Berlin marathon"
    assert initial_topic("Arsenal's matches vs Chelsea, the match was wild") == "Arsenal matches Chelsea wild"
    assert initial_topic("WHAT IS CRICKET") == "Cricket"  # shouting says nothing about case
    assert initial_topic("we moved our CSV exports to S3") == "Moved CSV exports S3"


def test_keyword_names_of_real_chat_read_as_phrases():
    docs = {}
    for category in ("food", "health", "history", "money", "movies", "politics", "science", "sports"):
        conversations = yaml.safe_load((CORPUS / f"{category}.yml").read_text(encoding="utf-8"))["conversations"]
        docs[category] = [str(line) for conversation in conversations for line in conversation][:30]
    names = keyword_topics(docs, set(docs), 3)
    assert set(names) == set(docs)
    for name in names.values():
        reads_as_a_phrase(name)
    assert "Stock market" in names["money"]  # said side by side: one phrase, in the chat's order
    assert {"soccer", "cricket"} & set(names["sports"].lower().split()), names["sports"]


def test_side_by_side_words_join_and_the_strongest_group_leads():
    docs = {
        "football": ["did you see the football match? Arsenal won", "what a football match, Arsenal were great",
                     "the football matches this season are wild", "Arsenal will win the league"],
        "running": ["I've been training for the Berlin marathon", "the Berlin marathon is in September",
                    "my marathon training plan has long runs", "training runs every sunday"],
    }
    names = keyword_topics(docs, set(docs), 3)
    assert names == {"football": "Football match Arsenal", "running": "Berlin marathon training"}


async def test_worlds_lists_phrase_names(tmp_path):
    config = parse_config({"bot": {"data_dir": str(tmp_path)}, **MINILM,
                           "memory": {"base_threshold": 0.3, "topic_delay_s": 0}})  # a MiniLM threshold
    app = await App.create(config, features=["bot.features.core", "bot.features.memory"])
    await app.start()
    try:
        ann = Person(app, "ann")
        for line in ["did you see the football match yesterday? Arsenal won 3-1",
                     "the football match was great, Arsenal pressed all game",
                     "Arsenal's football matches are the best this season",
                     "I've got so many football match tickets for Arsenal games"]:
            assert await ann.say(line) == ""
        assert (await ann.say("/worlds")).startswith("1 world")  # a command waits until the messages are stored
        await app.memory.flush()  # the background renaming, now
        listing = await ann.say("/worlds")
        assert "Football match Arsenal" in listing or "Arsenal football match" in listing, listing
    finally:
        await app.close()


async def football_world(engine) -> str:
    """Three messages about one football match in scope test:1: one world, due a name; its id."""
    chat = Chat("test:1")
    for text in ["did you see the football match yesterday? Arsenal won 3-1",
                 "the football match was great, Arsenal pressed all game",
                 "Arsenal's football matches are the best this season"]:
        world = (await engine.ingest(chat.msg(text))).world_id
    return world


async def test_flush_names_a_world_whose_background_renaming_it_cut_short(db_url):
    """``flush`` cancels a renaming under way (here: its LLM call, held by the endpoint) and names
    the world itself: only once the cancelled renaming has unwound are its worlds marked again."""
    first_call = threading.Event()

    def names(body: dict):
        if first_call.is_set():
            return json.dumps({"name": "Arsenal football"})
        first_call.set()
        return Raw(body=completion(json.dumps({"name": "too late"})), delay=20)

    with FakeOpenAI(names) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"))
        db, engine = await open_engine(db_url, llm=llm, extract_every_n=1000, extract_every_s=600,
                                       topic_delay_s=0, base_threshold=0.3)
        try:
            world = await football_world(engine)
            assert await asyncio.to_thread(first_call.wait, 10)  # the background renaming is under way
            await engine.flush()
            assert [(w.id, w.topic) for w in await engine.worlds("test:1")] == [(world, "Arsenal football")]
        finally:
            await close_engine(db, engine)


async def test_a_renaming_the_database_cut_short_is_one_warning_and_done_at_the_next_refresh(restartable_pg, caplog):  # noqa: F811
    db, engine = await open_engine(await restartable_pg.fresh_database(), topic_delay_s=600, base_threshold=0.3)
    try:
        world = await football_world(engine)
        restarting = await restartable_pg.going_down(4.0)
        with caplog.at_level(logging.WARNING, logger="engine.memory.engine"):
            assert await engine.refresh_topics("test:1") == 0
        (record,) = [r for r in caplog.records if r.name == "engine.memory.engine"]
        assert record.levelno == logging.WARNING and record.exc_info is None
        await restarting
        assert await engine.refresh_topics("test:1") == 1   # still marked: named now
        (named,) = await engine.worlds("test:1")
        assert named.id == world and named.topic in ("Football match Arsenal", "Arsenal football match")
    finally:
        await close_engine(db, engine)


async def test_an_endpoint_that_keeps_failing_is_one_warning_line_and_the_worlds_keep_keyword_names(db_url, caplog):
    """An LLM outage: the first world's request fails after its tries, the pass asks no more (each
    would wait as long) and says so in one line, without a traceback."""
    with FakeOpenAI(lambda body: Raw(500, {"error": {"message": "down"}})) as server:
        llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model", max_retries=0))
        db, engine = await open_engine(db_url, llm=llm, extract_every_n=1000, extract_every_s=600,
                                       topic_delay_s=600, base_threshold=0.3)
        try:
            await football_world(engine)
            chat = Chat("test:1")
            chat.n = 100   # message ids after football_world's
            for text in ["my sourdough bread recipe needs a longer proof in the oven",
                         "the sourdough bread came out of the oven with a great crust",
                         "bread baking tip: steam in the oven makes the sourdough crust"]:
                await engine.ingest(chat.msg(text))
            with caplog.at_level(logging.WARNING, logger="engine.memory.topics"):
                named = await engine.refresh_topics("test:1")
            (record,) = [r for r in caplog.records if r.name == "engine.memory.topics"]
            assert record.exc_info is None and "HTTP 500" in record.getMessage(), record.getMessage()
            assert len([r for r in server.requests if "topic" in json.dumps(r).lower()]) == 1
            topics = sorted(w.topic for w in await engine.worlds("test:1"))
            assert (named, len(topics)) == (2, 2) and any("Sourdough" in t or "Bread" in t for t in topics), topics
        finally:
            await close_engine(db, engine)
            await llm.close()


def test_a_name_drawn_from_few_messages_is_recomputed_at_each_growth_then_on_doubling():
    cfg = parse_config({}).memory   # topic_refresh_growth 2

    def renamed(evidence: int, named_at: int) -> bool:
        return needs_topic(cfg, WorldState("w", 0, evidence=evidence, topic_size=named_at))

    assert not renamed(2, 0) and renamed(3, 0)          # first named from three messages
    assert renamed(4, 3) and renamed(NAME_SETTLED_AT, NAME_SETTLED_AT - 1)   # provisional: each growth
    assert not renamed(4, 4) and not renamed(3, 4)       # no growth (or forgotten messages): kept
    assert not renamed(NAME_SETTLED_AT + 1, NAME_SETTLED_AT)                # settled: not at each growth
    assert not renamed(2 * NAME_SETTLED_AT - 1, NAME_SETTLED_AT) and renamed(2 * NAME_SETTLED_AT, NAME_SETTLED_AT)


def test_words_are_stemmed_alike_from_several_threads_at_once():
    """Worlds are named off the event loop while routing names newborn worlds on it: a stemmer
    shared between threads garbled words or raised IndexError."""
    from concurrent.futures import ThreadPoolExecutor

    text = "The council announced the transit fare increases yesterday, commuters protested loudly"
    expected = initial_topic(text)

    def name_often(_) -> bool:
        return all(initial_topic(text) == expected for _ in range(1000))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(name_often, range(4)))


def test_topic_names_leave_out_the_stop_words_of_their_language():
    assert initial_topic("Oi pessoal, alguém vai ao jogo do Flamengo hoje?") == "Jogo Flamengo"
    docs = {"match": ["Oi pessoal alguém vai ao jogo hoje?", "O Flamengo marcou dois gols no jogo",
                      "Que jogo! O Gabigol marcou de novo"],
            "leak": ["Oi gente, tem um vazamento na garagem do prédio", "O síndico vai chamar alguém para o vazamento",
                     "A garagem está alagada de novo"]}
    names = keyword_topics(docs, set(docs), 3)
    assert "jogo" in names["match"].lower() and "vazamento" in names["leak"].lower()
    for name in names.values():
        assert not set(name.lower().split()) & stop_words("pt"), name
    assert initial_topic("ใครรู้บ้างว่าท่อน้ำในลานจอดรถรั่ว").split()[:2] != ["ใคร", "บ้าง"]
    assert "ลานจอดรถ" in initial_topic("ใครรู้บ้างว่าท่อน้ำในลานจอดรถรั่ว")


def test_chinese_and_thai_names_are_words_of_their_own_written_without_spaces():
    # jieba gives a compound and its parts (足球比赛, 足球, 比赛): the name says the compound once;
    # chat words (有人 'someone', 知道 'know', 明天 'tomorrow', 一起 'together') name nothing
    assert initial_topic("我们明天一起去看足球比赛吧") == "足球比赛"
    assert initial_topic("有人知道车库的水管漏水了吗") == "车库水管漏水"
    docs = {"match": ["我们明天一起去看足球比赛吧", "昨天的足球比赛太精彩了", "你觉得这场比赛谁会赢？"],
            "leak": ["有人知道车库的水管漏水了吗", "车库又漏水了，物业什么时候来修？", "我已经给物业打电话了"]}
    names = keyword_topics(docs, set(docs), 3)
    assert names["match"] == "足球比赛" and " " not in names["leak"] and "车库" in names["leak"]
    assert "漏水" in names["leak"] and not {"有人", "知道", "已经"} & {w for w, _ in terms.segments(names["leak"])}
    thai = {"football": ["เมื่อวานฉันไปดูฟุตบอลที่สนามกับเพื่อน", "ฟุตบอลนัดนี้สนุกมาก", "ใครจะไปดูฟุตบอลพรุ่งนี้บ้าง"],
            "leak": ["ท่อน้ำในลานจอดรถของอาคารรั่วอีกแล้ว", "ใครรู้บ้างว่าท่อน้ำในลานจอดรถรั่ว",
                     "นิติบุคคลจะมาซ่อมท่อน้ำเมื่อไหร่"]}
    names = keyword_topics(thai, set(thai), 3)
    assert names["leak"] == "ท่อน้ำลานจอดรถรั่ว" and names["football"].startswith("ฟุตบอล")
    assert initial_topic("Arsenal football match tonight with 足球 fans") == "Arsenal football match 足球"


async def test_a_portuguese_chat_is_named_without_stop_words_at_the_console(app):
    await say_all(app, [("Ana", "Oi pessoal alguém vai ao jogo hoje?"), ("Bruno", "Eu vou! O Flamengo joga às 16h"),
                        ("Ana", "Oi pessoal, alguém vai ao jogo do Flamengo?")])
    await app.settled()
    listing = await Member(app, "Carla").say("/worlds")
    assert "Oi pessoal" not in listing and "alguém vai" not in listing
    assert "Jogo" in listing or "Flamengo" in listing
