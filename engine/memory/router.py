"""The routing rule: which world a message belongs to, and how absorbing moves a centroid.

Pure functions over vectors and numbers; the engine holds the state and persists it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.config import MemorySection
from engine.memory.textutil import content_words


def threshold(cfg: MemorySection, maturity: float) -> float:
    """A mature world is harder to join: base + gain x maturity."""
    return cfg.base_threshold + cfg.maturity_gain * maturity


def alpha(cfg: MemorySection, access_count: int, maturity: float) -> float:
    """How far one message moves the centroid: less as the world grows and matures."""
    return 1.0 / (access_count + 1) * (1.0 - cfg.alpha_damping * maturity)


def normalise(vec: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vec))
    return (vec / norm).astype(np.float32) if norm > 0 else vec.astype(np.float32)


def absorb(centroid: np.ndarray, vec: np.ndarray, a: float) -> np.ndarray:
    return normalise((1.0 - a) * centroid + a * vec)


def is_short(cfg: MemorySection, text: str) -> bool:
    """Little content of its own ('ok', 'haha', 'what about tomorrow?')."""
    return len(content_words(text)) <= cfg.short_max_content_words


def routing_vector(cfg: MemorySection, vec: np.ndarray, context: list[np.ndarray]) -> np.ndarray:
    """The message vector, nudged towards what the channel has just been talking about."""
    if not context or cfg.context_weight <= 0:
        return vec
    ctx = normalise(np.mean(context, axis=0))
    return normalise((1.0 - cfg.context_weight) * vec + cfg.context_weight * ctx)


@dataclass
class Candidate:
    world_id: str
    similarity: float
    maturity: float


def choose(cfg: MemorySection, candidates: list[Candidate]) -> Candidate | None:
    """The most similar candidate that clears its own threshold, or None (a world is born)."""
    passing = [c for c in candidates if c.similarity >= threshold(cfg, c.maturity)]
    return max(passing, key=lambda c: c.similarity) if passing else None
