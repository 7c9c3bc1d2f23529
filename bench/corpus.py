"""The labelled chat corpus the memory benchmarks use: chatterbot-corpus (PyPI, BSD-3).

chatterbot-corpus ships its English dialogues as YAML files, one per category, inside the
package: no download at run time. Each conversation is a short exchange (question, answer,
sometimes more turns) written as chat. We keep the categories that name a subject; the
others are dialogue acts or grab bags rather than topics (greetings, emotion, humor,
gossip, trivia quizzes, "conversations", the bot's own profile) and have no single
right world. ``ALL`` is there to measure them anyway.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import chatterbot_corpus
import yaml

DATA = Path(chatterbot_corpus.__file__).parent / "data" / "english"
TOPICAL = ("ai", "computers", "food", "health", "history", "literature", "money", "movies",
           "politics", "psychology", "science", "sports")
# coding and tech_support are topics too, but one is 185 and the other 1051 near-identical
# support exchanges: they would outweigh the other twelve put together.
ALL = tuple(sorted(p.stem for p in DATA.glob("*.yml")))


@dataclass(frozen=True)
class Conversation:
    topic: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ChatLine:
    topic: str
    conversation: int
    text: str


def load_conversations(categories: tuple[str, ...] = TOPICAL) -> list[Conversation]:
    out = []
    for name in categories:
        doc = yaml.safe_load((DATA / f"{name}.yml").read_text(encoding="utf-8"))
        for conv in doc.get("conversations") or []:
            lines = tuple(str(x).strip() for x in conv if str(x).strip())
            if lines:
                out.append(Conversation(name, lines))
    return out


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
            out.extend(ChatLine(topic, i, text) for text in conversations[i].lines)
        if not ids:
            del by_topic[topic]
        last = topic
    return out
