"""e5 with and without ONNX Runtime's memory arena: what a batch of long texts leaves in memory, and
what the arena saves in CPU (engine/onnx_encoder.py ``cpu_session`` turns it off).

Memory: each setting in a fresh interpreter embeds 256 chat lines, then 128 texts of 2,000
characters (a document's chunks), then the chat lines again, and prints its resident memory after
each. Speed: both settings in one process, alternating ``--reps`` times: 128 chat lines batched
(messages per CPU second), then 40 questions one at a time (CPU ms each), medians; and whether the
vectors differ.

    python -m bench.onnx_arena [--reps 4]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CACHE = Path.home() / ".cache" / "worldbot" / "onnx"
CHAT = [f"user{i}: the ferry leaves at seven from pier {i} and the bus at {i % 7}" for i in range(256)]
CHUNKS = [("the harbour strike goes on while the union and the port argue about wages " * 14)[:2000] + str(i)
          for i in range(128)]


def encoder(arena: bool):
    """The e5 encoder, its sessions made with the memory arena on or off."""
    import onnxruntime as ort

    from engine import e5_encoder

    def session(path, options):
        options.enable_cpu_mem_arena = arena
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    e5_encoder.cpu_session = session
    return e5_encoder.E5Encoder.packaged(CACHE)


def rss_mb() -> int:
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS"))) // 1024


def memory(arena: bool) -> None:
    enc = encoder(arena)
    enc.encode(CHAT)
    a = rss_mb()
    enc.encode(CHUNKS)
    b = rss_mb()
    enc.encode(CHAT)
    print(f"| arena {'on' if arena else 'off'} | {a} MB | {b} MB (+{b - a}) | {rss_mb()} MB |")


def speed(reps: int) -> None:
    encs = {arena: encoder(arena) for arena in (True, False)}
    batched: dict[bool, list[float]] = {True: [], False: []}
    single: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(reps):
        for arena, enc in encs.items():
            t = time.process_time()
            enc.encode(CHAT[:128])
            batched[arena].append(128 / (time.process_time() - t))
            t = time.process_time()
            for text in CHAT[:40]:
                enc.encode([text], kind="query")
            single[arena].append((time.process_time() - t) / 40 * 1000)
    for arena in (True, False):
        print(f"arena {'on' if arena else 'off'}: batched {np.median(batched[arena]):.1f} messages per CPU s, "
              f"one text {np.median(single[arena]):.2f} CPU ms")
    diff = float(np.abs(encs[True].encode(CHAT[:8]) - encs[False].encode(CHAT[:8])).max())
    print(f"largest difference between the two settings' vectors: {diff:g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--memory-only", choices=["on", "off"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_only:
        memory(args.memory_only == "on")
        return
    print("| e5 session | after chat lines | after the long texts | after chat lines again |")
    print("|---|---|---|---|")
    for setting in ("on", "off"):
        out = subprocess.run([sys.executable, "-m", "bench.onnx_arena", "--memory-only", setting],
                             capture_output=True, text=True, check=True)
        print(out.stdout.strip())
    speed(args.reps)


if __name__ == "__main__":
    main()
