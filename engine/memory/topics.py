"""Topic names: from the LLM when one is configured, else the words that set a world apart.

The keyword name is class-based TF-IDF (as in BERTopic): each world's recent messages form one
document; a word scores high when it is frequent in this world and rare across the scope.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from engine.memory.textutil import STOP_WORDS, content_words


def keyword_topics(docs: dict[str, list[str]], targets: set[str], n_words: int) -> dict[str, str]:
    """Names for the ``targets`` worlds; ``docs`` holds every world of the scope (for contrast)."""
    from sklearn.feature_extraction.text import CountVectorizer

    ids = list(docs)
    corpus = [" ".join(docs[w]) for w in ids]
    vectorizer = CountVectorizer(stop_words=sorted(w for w in STOP_WORDS if "'" not in w), lowercase=True,
                                 token_pattern=r"(?u)\b[^\W\d_][\w-]+\b")
    try:
        counts = vectorizer.fit_transform(corpus)
    except ValueError:  # nothing but stop words anywhere
        return {}
    vocab = vectorizer.get_feature_names_out()
    totals = np.asarray(counts.sum(axis=0)).ravel()
    avg_words = counts.sum() / max(len(ids), 1)
    idf = np.log1p(avg_words / np.maximum(totals, 1))
    names = {}
    for row, wid in enumerate(ids):
        if wid not in targets:
            continue
        tf = counts[row].toarray().ravel().astype(np.float64)
        if tf.sum() == 0:
            continue
        score = tf / tf.sum() * idf
        top = [i for i in np.argsort(-score, kind="stable")[:n_words] if score[i] > 0]
        if top:
            names[wid] = " · ".join(vocab[i] for i in top)
    return names


class TopicName(BaseModel):
    name: str = Field(description="2 to 5 words naming what this conversation is about")


def topic_prompt(keywords: str, samples: list[str], beliefs: list[str]) -> list[dict]:
    facts = "\n".join(f"- {b}" for b in beliefs[:10])
    lines = "\n".join(f"- {s[:200]}" for s in samples[:15])
    return [
        {"role": "system", "content": "You name chat topics. Give a short, specific name of 2 to 5 words "
                                      "(no quotes, no trailing period) that tells this topic apart from others."},
        {"role": "user", "content": f"Distinctive words: {keywords or '(none)'}\n"
                                    f"Known facts:\n{facts or '(none)'}\nRecent messages:\n{lines}"},
    ]


def initial_topic(text: str) -> str:
    """A provisional name for a newborn world: the first content words of its first message."""
    found = content_words(text)[:4]
    return " ".join(found) if found else text.strip()[:40]
