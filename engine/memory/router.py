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
threshold that suits every language. Besides the scope's mean, the model's shipped directions of
chat (``[memory] routing_directions``, ROUTING_DIRECTIONS: the top principal directions every chat
line varies along whatever its topic) are projected out too; as they move the best candidate
away from the raw nearest centroids, ``[memory] candidates`` raw neighbours are re-scored.

The speaker's direction (``[memory] speaker_prior``, on for e5): e5 embeds a message as "Speaker:
text", so one person's lines share a direction of their own, and a person who changes topic is
still drawn to the world of what they said last (a Portuguese chat of one person: a football match,
then a leak in the garage, whose first lines joined the match's world; bench/RESULTS.md). Routing
also takes out what is left of the speaker's running mean once the directions above are out,
softly: a share n / (n + speaker_prior) of it for a speaker with n messages in the scope, so a
newcomer's first lines are scored as before. Kept in memory per scope (a restart starts each
speaker again from nothing).
Stored vectors stay as the model gives them: recall and every other use of them is unchanged.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.config import E5_MODEL, MemorySection
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


# Directions shipped per model that routing projects out besides the scope's mean ([memory]
# routing_directions of them): e5's is the unit mean of 1,000 English chat lines of chitchat-dataset,
# then their top 10 principal directions, written by
# `python -m bench.e5_postprocess --fit chitchat --write-directions engine/memory/e5_directions.npy`.
ROUTING_DIRECTIONS = {E5_MODEL: Path(__file__).with_name("e5_directions.npy")}


@functools.cache
def _shipped(model: str) -> np.ndarray | None:
    path = ROUTING_DIRECTIONS.get(model)
    return np.load(path).astype(np.float32) if path is not None else None


def fixed_directions(model: str, n: int) -> np.ndarray | None:
    """The shipped mean direction and first ``n`` principal directions of ``model`` (None when
    ``n`` is 0 or the model ships none)."""
    found = _shipped(model) if n > 0 else None
    return None if found is None else found[:n + 1]


def centred(a: np.ndarray, b: np.ndarray, basis: np.ndarray | None) -> float:
    """The cosine of ``a`` and ``b`` once the directions of ``basis`` (orthonormal rows) are
    projected out of both (the plain cosine of ``a`` and unit ``b`` when ``basis`` is None)."""
    ab = float(a @ b)
    if basis is None:
        return ab
    au, bu = basis @ a, basis @ b
    norms = (float(a @ a) - float(au @ au)) * (float(b @ b) - float(bu @ bu))
    return (ab - float(au @ bu)) / np.sqrt(norms) if norms > 1e-12 else 0.0


def centred_many(a: np.ndarray, bs: np.ndarray, basis: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``centred`` of ``a`` with each row of ``bs``, in one pass; with ``weights``, row i of
    ``basis`` is taken out only in part (weight 2s - s^2 takes out a share s of the component)."""
    au, bu = basis @ a, bs @ basis.T
    wa, wu = (au, bu) if weights is None else (au * weights, bu * weights)
    norms = (float(a @ a) - float(wa @ au)) * (np.einsum("ij,ij->i", bs, bs) - np.einsum("ij,ij->i", wu, bu))
    return np.where(norms > 1e-12, (bs @ a - wu @ au) / np.sqrt(np.maximum(norms, 1e-12)), 0.0)


def with_speaker(basis: np.ndarray, speaker: tuple[np.ndarray, int] | None,
                 prior: float) -> tuple[np.ndarray, np.ndarray | None]:
    """``basis`` and the speaker's direction: what is left of their mean vector once ``basis`` is
    projected out, to be taken out in the share n / (n + prior) (weights for centred_many)."""
    if speaker is None or prior <= 0:
        return basis, None
    total, n = speaker
    rest = total - basis.T @ (basis @ total)
    norm = float(np.linalg.norm(rest))
    if n <= 0 or norm < 1e-9:
        return basis, None
    share = n / (n + prior)
    weights = np.append(np.ones(len(basis)), 2 * share - share * share)
    return np.vstack([basis, (rest / norm).astype(basis.dtype)]), weights


def speaker_key(message: MemoryMessage) -> str:
    """Who wrote ``message``: the platform's id of its author, or its name for imported history."""
    return message.author_id or message.author


def projection_basis(fixed: np.ndarray | None, centre: np.ndarray) -> np.ndarray:
    """Orthonormal rows spanning the model's ``fixed`` directions (or none) and the scope's unit
    ``centre``: what ``centred`` projects out."""
    if fixed is None or not len(fixed):
        return centre[None, :]
    q, _ = np.linalg.qr(np.vstack([fixed, centre]).T)
    return np.ascontiguousarray(q.T)


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
    """The message vector, nudged towards what the channel has just been talking about: ``context``,
    the channel's last contentful messages that went to its current world (``route``). Once a
    channel changes topic, the lines of the topic before no longer pull the new one's towards it."""
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
    context = [v for _, v, wid in list(channel.recent)[-cfg.context_messages:]
               if wid == channel.world_id] if cfg.context_messages else []
    query = routing_vector(cfg, vec, context)
    basis, weights = state.centre(), None
    if basis is not None:
        basis, weights = with_speaker(basis, state.speaker(speaker_key(message)), cfg.speaker_prior)
    nearest = index.search(query, cfg.candidates)
    if basis is not None and nearest:
        rescored = centred_many(query, index.vectors([wid for wid, _ in nearest]), basis, weights)
        nearest = [(wid, float(sim)) for (wid, _), sim in zip(nearest, rescored)]
    candidates = [Candidate(wid, sim, state.worlds[wid].maturity) for wid, sim in nearest]
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
                   float(centred_many(query, index.vector(world.id)[None, :], basis, weights)[0]) if basis is not None
                   else float(query @ index.vector(world.id)))
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
    if cfg.speaker_prior > 0:
        state.count_speaker(speaker_key(message), vec)
    channel.world_id, channel.last_ts = world.id, ts
    if not short:
        channel.recent.append((ts, vec, world.id))
        while len(channel.recent) > max(cfg.context_messages, 1):
            channel.recent.popleft()
    return result
