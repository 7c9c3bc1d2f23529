"""Ingest cost of the memory engine, no LLM: one message at a time, and a batch import.

* single: ``MemoryEngine.ingest`` of one message (embed + route + persist to SQLite), timed
  per call, for messages of a chat that already holds ``--warm`` messages; the embedding alone
  is timed on the same texts for comparison.
* batch: ``ingest_many`` of the whole corpus into a fresh scope (batched embeddings, one
  transaction per chunk), as `python -m bot import` does: messages per second.
* backends: the embedding alone on ONNX Runtime and on torch (sentence-transformers), message
  by message alternating between the two so both see the same machine load, and the whole
  corpus in batches: p50 per message and the ratio.

    python -m bench.ingest [--corpus chatterbot|bbc] [--single 200] [--warm 300]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from bench.corpus import CORPORA, chat_stream, load_corpus
from engine.config import load_config
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryMessage
from engine.services import build_services

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def messages(scope: str, texts: list[str]) -> list[MemoryMessage]:
    return [MemoryMessage(scope, "general", str(i), "user", text, T0 + timedelta(seconds=20 * i))
            for i, text in enumerate(texts)]


async def run(args) -> None:
    config = load_config(args.config)
    texts = [line.text for line in chat_stream(load_corpus(args.corpus))]
    embedder = Embedder.from_config(config.embedder)
    await embedder.embed(["warm up"])
    with tempfile.TemporaryDirectory() as tmp:
        services = build_services(config, await open_database(Path(tmp) / "memory.sqlite3"), llm=False, sims=False,
                                  embedder=embedder)
        engine = services.memory
        try:
            await services.start(jobs=False)
            t0 = time.perf_counter()
            await engine.ingest_many(messages("bench:batch", texts))
            batch_s = time.perf_counter() - t0

            history = messages("bench:single", texts)
            await engine.ingest_many(history[:args.warm])
            single = history[args.warm:args.warm + args.single]
            times = []
            for m in single:
                t0 = time.perf_counter()
                await engine.ingest(m)
                times.append(time.perf_counter() - t0)
            embed_times = []
            for m in single:
                t0 = time.perf_counter()
                await embedder.embed([m.text])
                embed_times.append(time.perf_counter() - t0)
            worlds = len(await engine.worlds("bench:single"))
        finally:
            await services.close()
    ms, ems = np.array(times) * 1000, np.array(embed_times) * 1000
    print(f"{args.corpus}: {len(texts)} messages, median {np.median([len(t) for t in texts]):.0f} characters")
    print(f"single message ingest (n={len(single)}, scope already holding {args.warm} messages in {worlds} worlds): "
          f"p50 {np.median(ms):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms | embedding alone p50 "
          f"{np.median(ems):.1f} ms, p95 {np.percentile(ems, 95):.1f} ms | route + persist p50 "
          f"{np.median(ms) - np.median(ems):.1f} ms")
    print(f"batch import (ingest_many, batch size {config.embedder.batch_size}): {len(texts)} messages in "
          f"{batch_s:.1f} s = {len(texts) / batch_s:.0f} messages/s, "
          f"x{(len(texts) / batch_s) / (1000 / np.median(ms)):.1f} the one-at-a-time rate")
    compare_backends(texts[:args.single], texts, config.embedder.batch_size)


def compare_backends(single: list[str], corpus: list[str], batch_size: int) -> None:
    pair = {"onnx": Embedder(backend="onnx", batch_size=batch_size),
            "torch": Embedder(backend="torch", batch_size=batch_size)}
    times: dict[str, list[float]] = {name: [] for name in pair}
    for emb in pair.values():
        emb.encode(["warm up"])
    for text in single:
        for name, emb in pair.items():
            t0 = time.perf_counter()
            emb.encode([text])
            times[name].append(time.perf_counter() - t0)
    batch = {}
    for name, emb in pair.items():
        t0 = time.perf_counter()
        emb.encode(corpus)
        batch[name] = time.perf_counter() - t0
    p50 = {name: float(np.median(t)) * 1000 for name, t in times.items()}
    print(f"embedding one message (n={len(single)}, alternating): onnx p50 {p50['onnx']:.1f} ms, "
          f"torch p50 {p50['torch']:.1f} ms, torch/onnx x{p50['torch'] / p50['onnx']:.2f} | "
          f"{len(corpus)} messages in batches of {batch_size}: onnx {batch['onnx']:.2f} s, "
          f"torch {batch['torch']:.2f} s, torch/onnx x{batch['torch'] / batch['onnx']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="configuration file (default: ./config.toml)")
    parser.add_argument("--corpus", choices=CORPORA, default="chatterbot")
    parser.add_argument("--single", type=int, default=200, help="messages timed one at a time")
    parser.add_argument("--warm", type=int, default=300, help="messages already in the scope before timing")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
