"""Sentence embeddings on ONNX Runtime: the same vectors as sentence-transformers, about three
times faster for the one short message that chat ingest embeds at a time.

Torch spends most of a 10-token forward pass in framework overhead; ONNX Runtime does not.
The model is exported from its sentence-transformers directory once per machine (torch's
exporter, a few seconds) into a cache folder, checked against sentence-transformers' own output
on probe sentences, and reused by every later process, which then needs neither torch nor
the model's Python classes. Only the layout of all-MiniLM-L6-v2 and its relatives is supported:
a Transformer, mean pooling and, optionally, normalisation.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

PROBES = ["hello", "How long should I boil fresh pasta?",
          "The striker scored two goals in the second half of a tight match at the stadium."]
SAME = 0.9999  # cosine an exported model must reach against sentence-transformers on PROBES


class UnsupportedModel(Exception):
    """The model cannot run on ONNX Runtime here; the caller falls back to torch."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "worldbot" / "onnx"


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _check_layout(folder: Path) -> int:
    """The max sequence length, once the module list is known to be Transformer + mean pooling."""
    try:
        listed = _read_json(folder / "modules.json")
        modules = [m["type"].rsplit(".", 1)[-1] for m in listed]
        pooling = next(m["path"] for m in listed if m["type"].endswith("Pooling"))
        pool_cfg = _read_json(folder / pooling / "config.json")
        max_len = int(_read_json(folder / "sentence_bert_config.json").get("max_seq_length", 512))
    except (OSError, ValueError, KeyError, StopIteration) as e:
        raise UnsupportedModel(f"{folder}: not a sentence-transformers folder this backend reads ({e})") from e
    if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]):
        raise UnsupportedModel(f"{folder}: modules {modules}, only Transformer, Pooling[, Normalize]")
    modes = {k for k, v in pool_cfg.items() if k.startswith("pooling_mode") and v is True}
    if modes != {"pooling_mode_mean_tokens"}:
        raise UnsupportedModel(f"{folder}: pooling {sorted(modes)}, only mean pooling")
    if not (folder / "tokenizer.json").exists():
        raise UnsupportedModel(f"{folder}: no tokenizer.json")
    return max_len


def _cache_key(folder: Path) -> str:
    h = hashlib.sha256(str(folder.resolve()).encode())
    for path in sorted(folder.glob("*")):
        if path.is_file():
            st = path.stat()
            h.update(f"{path.name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


def _export(folder: Path, target: Path, max_len: int) -> None:
    """torch -> ONNX, written to a temporary file and renamed, so a crash leaves no half file."""
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    model = st[0].auto_model.eval()
    example = st.tokenize(["a short example sentence"])
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in example]
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about shapes fixed at export time
            torch.onnx.export(model, tuple(example[n] for n in names), tmp, input_names=names,
                              output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                              dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]})
        reference = st.encode(PROBES, normalize_embeddings=True, convert_to_numpy=True)
        exported = OnnxSentenceEncoder(folder, Path(tmp), max_len).encode(PROBES)
        worst = float(np.min(np.sum(reference * exported, axis=1)))
        if worst < SAME:
            raise UnsupportedModel(f"{folder}: the exported model differs from torch (cosine {worst:.5f})")
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


def cpu_session(path: Path, options: Any) -> Any:
    """An ONNX Runtime session on the CPU, with ``options`` and without a memory arena: the arena
    grows to the largest batch run so far and never gives it back, so one simulation's document
    chunks (long texts, batches of 64) kept 700 MB in the bot for good while chat lines need tens
    (tests/engine/test_e5_encoder.py); without it a batch's memory is freed after it, at the same
    CPU cost within noise and the same vectors to the bit (python -m bench.onnx_arena)."""
    import onnxruntime as ort
    options.enable_cpu_mem_arena = False
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxSentenceEncoder:
    def __init__(self, folder: Path, onnx_path: Path, max_len: int):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_len)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = cpu_session(onnx_path, options)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.dim = int(self.encode(["x"]).shape[1])

    @classmethod
    def open(cls, folder: str | Path) -> "OnnxSentenceEncoder":
        """The cached export of ``folder``, made now when missing."""
        folder = Path(folder)
        max_len = _check_layout(folder)
        target = cache_dir() / f"{folder.name}-{_cache_key(folder)}.onnx"
        if target.exists():
            try:
                return cls(folder, target, max_len)
            except Exception as e:  # damaged cache file: export again
                log.warning("embedder: cached ONNX model %s unreadable (%s); exporting again", target, e)
                target.unlink(missing_ok=True)
        log.info("exporting %s to ONNX (once per machine): %s", folder, target)
        _export(folder, target, max_len)
        return cls(folder, target, max_len)

    def encode(self, texts: list[str], batch_size: int = 64, kind: str = "passage") -> np.ndarray:
        """(len(texts), dim) float32 unit rows, in the order given (``kind`` makes no difference to
        this model). Batches hold texts of similar
        length, so little padding is computed."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: list[np.ndarray] = [None] * len(texts)  # type: ignore[list-item]
        for start in range(0, len(texts), batch_size):
            picked = order[start:start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in picked])
            width = max(len(e.ids) for e in encodings)
            feed = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in self.inputs}
            for row, e in enumerate(encodings):
                n = len(e.ids)
                feed["input_ids"][row, :n] = e.ids
                feed["attention_mask"][row, :n] = e.attention_mask
                if "token_type_ids" in feed:
                    feed["token_type_ids"][row, :n] = e.type_ids
            hidden = self.session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for row, i in enumerate(picked):
                out[i] = pooled[row]
        return np.ascontiguousarray(np.stack(out), dtype=np.float32)
