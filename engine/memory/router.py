"""The routing rule: which world a message belongs to, and how absorbing moves a centroid.

Functions over vectors and numbers, and ``route``, which applies the rule to a scope's cached
state (engine.memory.scope_cache); the caller holds the scope's lock and persists the result.

Centring (``[memory] routing_centre``, on for e5): every e5 vector shares a large common
direction, so any two chat lines are ~0.9 similar and one language's lines a little more or less
than another's; a threshold on raw cosines then splits one language's topics into many worlds
and lumps another's together. With centring, similarities for routing and merging are taken
with the scope's mean direction projected out of both vectors (``centred``): the mean of the
scope's messages, counted from a prior of generic chat lines in several languages (PRIOR_LINES)
so that a new scope starts sensibly, then from its own messages. Measured on chatterbot-corpus
in four languages (bench/RESULTS.md): fewer worlds per topic at the same purity, and one
threshold that suits every language.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.config import MemorySection
from engine.memory.models import MemoryMessage, RouteResult, WorldState, aware, new_world_id
from engine.memory.textutil import content_words

if TYPE_CHECKING:
    from engine.memory.scope_cache import ChannelState, ScopeState


# Generic chat lines whose mean direction a scope's centre starts from, PRIOR_WEIGHT messages strong.
PRIOR_LINES = ("Ana: ok", "Ben: good morning everyone", "Chloe: what do you think?", "Dev: thanks, see you later",
               "Ana: bom dia pessoal", "Ben: alguém sabe o que aconteceu?", "Chloe: valeu, até amanhã",
               "Dev: สวัสดีทุกคน", "Ana: วันนี้ทำอะไรกันบ้าง", "Ben: ¿alguien sabe qué pasó ayer?",
               "Chloe: guten Morgen zusammen", "Dev: 今日は何をしましたか", "Ana: ciao a tutti, come va?",
               "Ben: je ne sais pas trop", "Chloe: 오늘 뭐 했어요?", "Dev: 大家好，今天怎么样？")
PRIOR_WEIGHT = 3.0


def centred(a: np.ndarray, b: np.ndarray, direction: np.ndarray | None) -> float:
    """The cosine of ``a`` and ``b`` once the unit vector ``direction`` is projected out of both
    (the plain cosine of ``a`` and unit ``b`` when ``direction`` is None)."""
    ab = float(a @ b)
    if direction is None:
        return ab
    au, bu = float(a @ direction), float(b @ direction)
    norms = (float(a @ a) - au * au) * (float(b @ b) - bu * bu)
    return (ab - au * bu) / np.sqrt(norms) if norms > 1e-12 else 0.0


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


def route(cfg: MemorySection, state: "ScopeState", channel: "ChannelState", message: MemoryMessage,
          vec: np.ndarray, audience: str) -> RouteResult:
    """Route one message among the worlds of ``audience`` only (audiences never share a world):
    absorb it into the nearest world that clears its threshold, let a short message follow the
    channel's current world, or give birth to a world. Updates ``state`` and ``channel``."""
    index = state.index(audience)
    ts = aware(message.ts)
    while channel.recent and (ts - channel.recent[0][0]).total_seconds() > cfg.context_window_s:
        channel.recent.popleft()
    context = [v for _, v in list(channel.recent)[-cfg.context_messages:]] if cfg.context_messages else []
    query = routing_vector(cfg, vec, context)
    direction = state.centre()
    candidates = [Candidate(wid, sim if direction is None else centred(query, index.vector(wid), direction),
                            state.worlds[wid].maturity) for wid, sim in index.search(query, cfg.candidates)]
    chosen = choose(cfg, candidates)
    short = is_short(cfg, message.text)
    recent_world = (channel.world_id if channel.world_id is not None and channel.world_id in index
                    and channel.last_ts is not None
                    and (ts - channel.last_ts).total_seconds() <= cfg.short_window_s else None)
    if chosen is not None:
        world = state.worlds[chosen.world_id]
        a = alpha(cfg, world.access_count, world.maturity)
        index.upsert(world.id, absorb(index.vector(world.id), vec, a))
        result = RouteResult(world.id, "absorb", chosen.similarity)
    elif short and recent_world is not None:
        # Little content of its own: it belongs to what the channel is talking about.
        world = state.worlds[recent_world]
        sim = next((c.similarity for c in candidates if c.world_id == world.id),
                   centred(query, index.vector(world.id), direction))
        result = RouteResult(world.id, "follow", sim)
    else:
        world = WorldState(new_world_id(), 0, audience=audience)
        while world.id in state.worlds:
            world.id = new_world_id()
        state.worlds[world.id] = world
        index.upsert(world.id, vec)
        result = RouteResult(world.id, "birth", 1.0)
    world.access_count += 1
    world.evidence += 1
    state.count_in_centre(vec)
    channel.world_id, channel.last_ts = world.id, ts
    if not short:
        channel.recent.append((ts, vec))
        while len(channel.recent) > max(cfg.context_messages, 1):
            channel.recent.popleft()
    return result
