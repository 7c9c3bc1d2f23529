"""Text embeddings for the simulation graph: any object with ``async embed(texts, kind) -> ndarray``
(``engine.embedder.Embedder`` in the bot; ``kind`` "passage" for what is stored, "query" for a
search). Rows must be L2-normalised float32 vectors, so a dot product is the cosine similarity;
they are stored as float32 little-endian bytes (SQLite blobs, pgvector values on PostgreSQL:
engine.db converts).
"""
from __future__ import annotations

from typing import Protocol

import numpy as np


class TextEmbedder(Protocol):
    async def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray: ...


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)
