"""Chat text fitted for search: speakers, resolved dates (in the message's language) and
attachments are searchable, questions are expanded the same way, old databases are refitted and
keep working, and forgetting empties the index."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from bot.app import App
from bot.neutral import Attachment
from engine.config import ConfigError, parse_config
from engine.db import discover_migrations, open_database
from engine.memory import MemoryMessage
from engine.memory.audience import Viewer
from engine.memory.chattext import dates_in, searchable_text
from engine.memory.keyword_sql import keyword_beliefs
from engine.memory.stopwords import ENGLISH_STOP_WORDS
from engine.memory.terms import detect_language
from engine.memory.textutil import fts_query
from tests.helpers.discord import fake, start_bot, stop_bot, wait_for_texts  # noqa: F401  (fake: the Discord fake fixture)
from tests.helpers.memory import close_engine, open_engine
from tests.helpers.search import MONDAY, Member, app, keyword_hits  # noqa: F401  (app: the console app fixture)
from tests.helpers.telegram import text_of, tg  # noqa: F401  (tg: the Telegram app fixture)

pytestmark = pytest.mark.timeout(120)  # the adapter tests wait on real clients


@pytest.mark.parametrize("text, forms", [
    ("yesterday I ran a marathon", ["7 May 2023"]),
    ("we met last Friday", ["5 May 2023"]),
    ("on Sunday I painted", ["7 May 2023"]),
    ("see you next month", ["June 2023"]),
    ("two weeks ago", ["24 April 2023"]),
    ("a couple of days ago", ["6 May 2023"]),
    ("last year was hard", ["2022"]),
    ("in 3 days", ["11 May 2023"]),
    ("last weekend", ["6 May 2023", "7 May 2023"]),
    ("tonight and tomorrow", ["8 May 2023", "9 May 2023"]),
    ("the day before yesterday", ["6 May 2023"]),
    ("flying out on June 3rd", ["3 June 2023"]),         # a day without its year: the nearest one
    ("back on Jan 5", ["5 January 2023"]),
    ("2023-05-07, May 7, 2023 and 7th of May 2023", ["7 May 2023"]),
    ("since March 2021", ["March 2021"]),
    ("I may go, maybe in a bit", []),                    # "may" the verb is no month
    ("31 February", []),
])
def test_date_expressions_resolve_against_the_message_time(text, forms):
    assert dates_in(text, MONDAY) == forms


def test_searchable_text_keeps_text_attachments_and_dates():
    found = searchable_text("look what I got yesterday", MONDAY, ("bike.jpg", "a photo of a red bike", ""))
    assert found.split("\n") == ["look what I got yesterday", "bike.jpg", "a photo of a red bike", "7 May 2023"]
    assert searchable_text("  plain  ", MONDAY) == "plain"


def test_dates_are_read_in_the_configured_time_zone():
    evening_in_new_york = datetime(2023, 5, 9, 2, 0, tzinfo=timezone.utc)  # 22:00 on 8 May there
    assert searchable_text("yesterday", evening_in_new_york).endswith("8 May 2023")
    assert searchable_text("yesterday", evening_in_new_york, (), "America/New_York").endswith("7 May 2023")
    assert parse_config({"memory": {"timezone": "America/New_York"}}).memory.timezone == "America/New_York"
    with pytest.raises(ConfigError, match="memory.timezone: .*unknown time zone 'Mars/Base'"):
        parse_config({"memory": {"timezone": "Mars/Base"}})


def asked(question: str, now: datetime | None = None) -> list[str]:
    query = fts_query(question, now=now)
    return [" ".join(a) for a in query.alternatives] if query else []


def test_questions_are_expanded_like_the_index():
    # stemmed as the index is (Porter for English): "identity" and "identities" are one token
    assert asked("What is Caroline's identity?") == ["carolin", "ident"]
    assert asked("What did Anna buy?") == ["anna", "bui", "bought"]
    assert asked("What did Anna do on 7 May 2023?") == ["7 mai 2023", "anna"]
    assert asked("what did Anna do yesterday?", now=MONDAY) == ["7 mai 2023", "anna"]
    assert asked("anything in May 2023?") == ["mai 2023"]
    assert asked("what did you say?") == []


async def test_third_person_question_finds_first_person_message(app):
    anna, bob, cy = Member(app, "Anna"), Member(app, "Bob"), Member(app, "Cy")
    await bob.say("I bought a car")
    await anna.say("I bought a bike for the long summer rides")
    await cy.say("I bought a boat")
    await bob.say("the weather is nice for a ride")
    await app.settled()
    # Every message says "bought" and Anna's is the longest (bm25 ranks it last on the text alone):
    # only the speaker column says whose.
    assert (await keyword_hits(app.db, "What did Anna buy?"))[0] == "I bought a bike for the long summer rides"
    assert "Anna, 2023-05-08 13:56: I bought a bike" in await bob.say("/recall What did Anna buy?")


RAN = "yesterday I ran a marathon in the rain, all the way to the finish line"


async def test_question_about_a_day_finds_the_message_that_said_yesterday(app):
    anna, bob = Member(app, "Anna"), Member(app, "Bob")
    await anna.say("the race is next week, I am nervous", MONDAY - timedelta(days=10))
    await bob.say("how did it go? I did the dishes all day", MONDAY - timedelta(hours=1))
    await anna.say(RAN, MONDAY)
    await anna.say("today I rest my legs", MONDAY + timedelta(days=1))
    await app.settled()
    # the longest of Anna's messages: only its resolved date puts it first
    assert (await keyword_hits(app.db, "What did Anna do on 7 May 2023?"))[0] == RAN
    # asked on 8 May: "yesterday" in the question is 7 May as well
    assert (await keyword_hits(app.db, "what did Anna do yesterday?"))[0] == RAN
    assert RAN in await bob.say("/recall What did Anna do on 7 May 2023?")


async def test_attachment_names_and_captions_are_searchable(app):
    anna, bob = Member(app, "Anna"), Member(app, "Bob")
    await bob.say("good morning everyone")
    await anna.say("look at this!", attachments=(Attachment("medal.jpg", caption="a gold finisher medal"),))
    await bob.say("wow, congratulations")
    await app.settled()
    assert await keyword_hits(app.db, "gold medal") == ["look at this!"]
    assert "look at this!" in await bob.say("/recall the gold medal")
    stored = await app.db.fetchval("SELECT search_text FROM memory_messages WHERE text='look at this!'")
    assert stored == "look at this!\nmedal.jpg\na gold finisher medal"


async def test_forget_removes_messages_from_the_index(app):
    anna, admin = Member(app, "Anna"), Member(app, "root", admin=True)
    await anna.say("yesterday I ran a marathon")
    await anna.say("I bought a bike", attachments=(Attachment("bike.png"),))
    await app.settled()
    assert len(await keyword_hits(app.db, "Anna")) == 2
    await admin.say("/forget")
    assert "Forgot this channel: 2 messages" in await admin.say("/forget confirm")
    assert await keyword_hits(app.db, "Anna marathon bike 7 May 2023") == []
    if app.db.dialect == "sqlite":   # the external-content index agrees with its table, row for row
        await app.db.execute("INSERT INTO memory_messages_fts(memory_messages_fts) VALUES ('integrity-check')")


async def test_a_database_from_before_keeps_its_messages_searchable(db_url):
    old = await open_database(db_url, upgrade=False)
    await old.upgrade(target=13)
    await old.execute("INSERT INTO worlds(id, scope, topic, centroid, created_at, last_active) "
                      "VALUES ('w1', 'test:1', 'running', ?, '2023-05-08', '2023-05-08')", (bytes(1536),))
    for i, (author, text) in enumerate([("Anna", "yesterday I ran a marathon"), ("Bob", "nice, well done")]):
        await old.execute("INSERT INTO memory_messages(scope, world_id, channel, message_id, author, text, ts, "
                          "embedding) VALUES ('test:1', 'w1', 'general', ?, ?, ?, ?, ?)",
                          (str(i), author, text, (MONDAY + timedelta(minutes=i)).isoformat(), bytes(1536)))
    await old.execute("INSERT INTO beliefs(scope, world_id, subject, predicate, object, norm_key, norm_object, "
                      "confidence, learned_at, valid_from, decayed_at, embedding) VALUES ('test:1', 'w1', 'Anna', "
                      "'is training for', 'marathons', 'anna|training', 'marathons', 0.8, ?, ?, ?, ?)",
                      (*(MONDAY.isoformat(),) * 3, bytes(1536)))
    await old.close()

    db, engine = await open_engine(db_url)  # migrates, then fits the old messages at start
    try:
        # beliefs are searched with the same query, stemmed alike: "trains ... marathon" finds "training ... marathons"
        assert await keyword_beliefs(db, Viewer.operator("test:1"), fts_query("Who trains for a marathon?"), 5)
        assert await keyword_hits(db, "What did Anna do on 7 May 2023?", scope="test:1") == [
            "yesterday I ran a marathon"]
        assert await keyword_hits(db, "well done Bob", scope="test:1") == ["nice, well done"]
        assert await db.fetchval("SELECT count(*) FROM memory_messages_unfitted") == 0
        assert await engine.ingest(MemoryMessage("test:1", "general", "2", "Anna", "I ran again today", MONDAY))
        assert len(await keyword_hits(db, "Anna marathon ran", scope="test:1")) == 2
        await engine.forget("test:1")
        assert await keyword_hits(db, "Anna marathon ran", scope="test:1") == []
    finally:
        await close_engine(db, engine)


async def stored_search_text(app: App, text: str) -> str | None:
    return await app.db.fetchval("SELECT search_text FROM memory_messages WHERE text=?", (text,))


async def test_discord_attachment_names_and_alt_text_reach_memory(tmp_path, monkeypatch, fake):
    app, stop, task, *_ = await start_bot(tmp_path, monkeypatch, fake, message_content=True)
    try:
        msg = fake.missed_message("the plan for the garden")
        msg["attachments"] = [{"id": fake.next_id(), "filename": "raised_beds.pdf", "size": 2048,
                               "url": "https://cdn.example/raised_beds.pdf", "proxy_url": "https://cdn.example/p",
                               "description": "sketch of three raised beds"}]
        await fake.dispatch("MESSAGE_CREATE", msg)
        await wait_for_texts(app, 1)
        assert await stored_search_text(app, "the plan for the garden") == \
            "the plan for the garden\nraised_beds.pdf\nsketch of three raised beds"
    finally:
        await stop_bot(app, stop, task)


async def test_telegram_document_name_reaches_memory(tg):
    app, server, _, _ = tg
    document = {"file_id": "d1", "file_name": "budget_2024.xlsx", "file_size": 10}
    server.push_message(-77, "the garden budget, as promised", document=document)
    server.push_message(-77, "/recall budget")  # a command waits until its channel's earlier messages are stored
    await server.wait_for("sendMessage", lambda c: "the garden budget, as promised" in text_of(c))
    assert await stored_search_text(app, "the garden budget, as promised") == \
        "the garden budget, as promised\nbudget_2024.xlsx"


def test_the_stop_words_are_scikit_learn_s_english_list():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as scikit_learn_s

    assert ENGLISH_STOP_WORDS == scikit_learn_s


# -- other languages -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, lang, forms", [
    ("ontem eu corri uma maratona", "pt", ["7 May 2023"]),
    ("na semana passada fomos ao jogo", "pt", ["May 2023"]),
    ("anteontem choveu muito aqui", "pt", ["6 May 2023"]),
    ("há 3 dias", "pt", ["5 May 2023"]),
    ("vou viajar em 5 de junho de 2023", "pt", ["5 June 2023"]),
    ("ayer fui al partido", "es", ["7 May 2023"]),
    ("เมื่อวานฉันไปดูฟุตบอล", "th", ["7 May 2023"]),
    ("我昨天去看足球", "zh", ["7 May 2023"]),
    ("o mar estava calmo", "pt", []),       # "mar" is the sea, not March
])
def test_dates_named_in_other_languages_resolve_against_the_message_time(text, lang, forms):
    assert detect_language(text) == lang
    assert dates_in(text, MONDAY, lang) == forms


async def test_a_portuguese_question_about_a_day_finds_what_was_said_the_day_after(app):
    ran = "ontem eu corri uma maratona debaixo de chuva até a linha de chegada"
    ana = Member(app, "Ana")
    await ana.say("a corrida é semana que vem, estou nervosa", MONDAY - timedelta(days=10))
    await Member(app, "Bruno").say("como foi? passei o dia lavando louça", MONDAY - timedelta(hours=1))
    await ana.say(ran, MONDAY)
    await app.settled()
    assert (await keyword_hits(app.db, "O que a Ana fez em 7 de maio de 2023?"))[0] == ran
    assert (await keyword_hits(app.db, "o que a Ana fez ontem?"))[0] == ran       # asked on 8 May


async def test_a_database_from_before_is_refitted_in_every_language(tmp_path):
    football = "เมื่อวานฉันไปดูฟุตบอลที่สนามกับเพื่อน"   # yesterday I went to watch football at the stadium
    search_terms = next(m for m in discover_migrations() if m.path.name.endswith("_search_terms.sql"))
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    old = await open_database(url, upgrade=False)
    await old.upgrade(target=search_terms.version - 1)
    await old.execute("INSERT INTO worlds(id, scope, topic, centroid, created_at, last_active) "
                      "VALUES ('w1', 'test:1', 'x', ?, 'n', 'n')", (bytes(1536),))
    await old.execute("INSERT INTO memory_messages(scope, world_id, channel, message_id, author, text, search_text, "
                      "ts, embedding) VALUES ('test:1', 'w1', 'c', '1', 'Somchai', ?, ?, ?, ?)",
                      (football, football, MONDAY.isoformat(), bytes(1536)))
    await old.close()
    db, engine = await open_engine(url)   # migrates, then fits the stored rows at start
    try:
        assert await keyword_hits(db, "ฟุตบอล", scope="test:1") == [football]
        assert await keyword_hits(db, "7 May 2023", scope="test:1") == [football]   # its "yesterday"
    finally:
        await close_engine(db, engine)
