"""Topic names read as a short phrase: stop words and contractions out, one word per stem, words
said side by side kept in their order, consistent capitals."""
from __future__ import annotations

from pathlib import Path

import chatterbot_corpus
import snowballstemmer
import yaml

from bot.app import App
from engine.config import parse_config
from engine.memory.topics import NAME_STOP, initial_topic, keyword_topics
from tests.test_memory_commands import Person

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
    config = parse_config({"bot": {"data_dir": str(tmp_path)}, "memory": {"base_threshold": 0.3, "topic_delay_s": 0}})
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
        await app.services["memory"].flush()  # the background renaming, now
        listing = await ann.say("/worlds")
        assert "Football match Arsenal" in listing or "Arsenal football match" in listing, listing
    finally:
        await app.close()


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
