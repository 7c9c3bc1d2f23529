"""The embedding backends: ONNX Runtime gives the vectors torch gives, its export is cached and
re-made when damaged, and a model it cannot run falls back to torch (or fails when asked for
ONNX explicitly)."""
from __future__ import annotations

import asyncio
import json
import logging
import shutil

import numpy as np
import pytest

import engine.embedder as embedder_mod
from engine.embedder import Embedder, _model_location
from engine.onnx_encoder import OnnxSentenceEncoder, UnsupportedModel, cache_dir

TEXTS = ["ok", "How long should I boil fresh pasta?", "The striker scored twice in the second half.",
         "Je voudrais réserver une table pour deux personnes ce soir.", "",
         "a much longer message " * 40]


@pytest.fixture
def fresh_models(monkeypatch, tmp_path):
    """A private export cache and no model loaded yet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(embedder_mod, "_models", {})


def test_onnx_matches_torch_and_keeps_order(fresh_models):
    minilm = embedder_mod.MINILM_MODEL
    onnx, torch = Embedder(minilm, backend="onnx"), Embedder(minilm, backend="torch")
    a, b = onnx.encode(TEXTS), torch.encode(TEXTS)
    assert type(onnx.model).__name__ == "OnnxSentenceEncoder" and onnx.dim == torch.dim == 384
    assert a.shape == b.shape == (len(TEXTS), 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(a * b, axis=1)) > 0.9999
    # Batches are formed by length; the rows still come back in the order given.
    one_by_one = np.stack([onnx.encode([t])[0] for t in TEXTS])
    assert np.allclose(a, one_by_one, atol=1e-5)


def test_export_is_cached_and_a_damaged_file_is_made_again(fresh_models, caplog):
    folder = _model_location(embedder_mod.MINILM_MODEL)
    OnnxSentenceEncoder.open(folder)
    [exported] = list(cache_dir().glob("*.onnx"))
    stamp = exported.stat().st_mtime_ns
    OnnxSentenceEncoder.open(folder)
    assert exported.stat().st_mtime_ns == stamp  # reused, not exported again

    exported.write_bytes(exported.read_bytes()[:1000])  # a truncated copy
    with caplog.at_level(logging.WARNING):
        again = OnnxSentenceEncoder.open(folder)
    assert "unreadable" in caplog.text
    assert again.encode(["hello"]).shape == (1, 384)
    assert exported.stat().st_size > 1_000_000


def test_unsupported_layout_falls_back_to_torch(fresh_models, tmp_path, caplog):
    folder = tmp_path / "cls-model"
    shutil.copytree(_model_location(embedder_mod.MINILM_MODEL), folder)
    pooling = folder / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg))

    with pytest.raises(UnsupportedModel, match="only mean pooling"):
        Embedder(str(folder), backend="onnx").encode(["hi"])
    with caplog.at_level(logging.WARNING):
        auto = Embedder(str(folder))
        vec = auto.encode(["hi"])
    assert type(auto.model).__name__ == "TorchSentenceEncoder" and vec.shape == (1, 384)
    assert "using torch" in caplog.text
    assert not list(cache_dir().glob("*.onnx"))


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend must be one of"):
        Embedder(backend="tensorrt")


async def test_embedding_runs_off_the_event_loop(fresh_models):
    """While a large batch is embedded, the loop keeps running other tasks."""
    emb = Embedder(embedder_mod.MINILM_MODEL)
    await emb.embed(["warm up"])
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    ticks = 0
    vecs = await emb.embed(["a message about the weather in spring, with some more words"] * 600)
    task.cancel()
    assert vecs.shape == (600, 384)
    assert ticks > 20


async def test_concurrent_embedding_gives_the_same_vectors(fresh_models):
    """Ingest and recall embed from several worker threads at once."""
    emb = Embedder()
    texts = [f"message number {i} about {topic}" for i, topic in
             enumerate(["bread", "football", "python code", "the weather", "taxes"] * 8)]
    alone = [emb.encode(texts[i::4]) for i in range(4)]
    together = await asyncio.gather(*(emb.embed(texts[i::4]) for i in range(4)))
    for part, expected in zip(together, alone):
        assert np.allclose(part, expected, atol=1e-5)
