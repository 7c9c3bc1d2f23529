"""llama.cpp's own OpenAI-compatible server (``llama-server``) on 127.0.0.1, for
tests/test_llama_cpp_server.py:

    python tests/helpers/llama_server.py MODEL.gguf PORT ALIAS

xllamacpp's prebuilt wheel carries llama-server's C++ code and runs it inside this process (its
HTTP threads answer while the main thread sleeps); the process serves until it is terminated and
logs to stderr. One slot of 8192 tokens and one thread, as a 2-core machine shared with the test
itself can afford (two threads spinning against each other were measured 7x slower). A request
that names no repeat penalty gets 1.1, llama-cpp-python's server default (llama-server's is
none): the agents' requests name none, and without one SmolLM2 repeated itself to the end of
their 2048-token budget (4 minutes a turn on a loaded machine).
"""
from __future__ import annotations

import sys
import threading

import xllamacpp


def main(argv: list[str]) -> None:
    model, port, alias = argv
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {alias}
    params.hostnames = ["127.0.0.1"]
    params.port = int(port)
    params.n_ctx = 8192
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.sampling.penalty_repeat = 1.1
    server = xllamacpp.Server(params)  # listening once it returns
    print(f"serving {alias} on {server.listening_address}", file=sys.stderr, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
