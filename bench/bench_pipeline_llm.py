"""LLM calls and tokens per pipeline step (1-3), and how they grow with document size and agents.

Runs the real steps against a local fake OpenAI-compatible endpoint whose answers are derived
from each request (tests/fakes/sim_responder.py), with the real openai client and MiniLM.
Tokens are the fake's estimate (characters / 4) of what was sent and returned, so prompt
sizes are representative; completion sizes depend on the fake's answers.

    python bench/bench_pipeline_llm.py [--sizes 1,2,4,8] [--agents 5,10,20,40]

The document is tests/data/harbour_strike.md; size k concatenates k copies whose proper
names are made distinct per copy, so entities grow with the text as in a longer document.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.config import Config  # noqa: E402
from engine.db import open_database  # noqa: E402
from engine.embedder import Embedder  # noqa: E402
from engine.services import build_services  # noqa: E402
from engine.sim import pipeline, records  # noqa: E402
from engine.sim.context import SimContext  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.sim_responder import SimResponder  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "harbour_strike.md"
SYLLABLES = ["ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "de", "po", "gu", "ze", "ba", "fi", "ho"]


def invented(word: str, copy: int) -> str:
    """A pronounceable stand-in for ``word`` in copy ``copy`` (copy 0 keeps the real word)."""
    if copy == 0:
        return word
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(word)) + 7919 * copy
    parts = [SYLLABLES[(seed // len(SYLLABLES) ** n) % len(SYLLABLES)] for n in range(3)]
    return "".join(parts).capitalize()


def scaled_text(k: int) -> str:
    """k copies of the sample; each copy's capitalised words become other, unrelated names."""
    base = SAMPLE.read_text(encoding="utf-8")
    def renamed(i: int) -> str:
        return re.sub(r"\b([A-Z][a-z]{3,})\b", lambda m: invented(m.group(1), i), base)
    return "\n\n".join(renamed(i) for i in range(k))


async def run_once(server: FakeOpenAI, embedder, workdir: Path, size: int, agents: int) -> dict:
    server.responder = SimResponder()
    config = Config.model_validate({
        "bot": {"data_dir": str(workdir / f"data_{size}_{agents}")},
        "llm": {"base_url": server.base_url, "model": "big", "fast_model": "small", "max_concurrency": 8},
        "simulation": {"max_agents": 200},
    })
    doc = workdir / f"doc_{size}.md"
    doc.write_text(scaled_text(size), encoding="utf-8")
    services = build_services(config, await open_database(workdir / f"bench_{size}_{agents}.sqlite3"), sims=False,
                              embedder=embedder)
    db, llm = services.db, services.llm
    assert llm is not None  # configured above
    try:
        sim_id, spec = await records.create(db, config, [doc], "How will opinion on the strike evolve?",
                                            "bench:local", agents=agents, rounds=24)
        ctx = SimContext(sim_id, config.data_dir / "sims" / sim_id, db, llm, embedder, spec, config)
        times: dict[str, float] = {}
        steps = []
        for name, fn in pipeline.STEPS[:3]:
            async def timed(c, fn=fn, name=name):
                t0 = time.perf_counter()
                out = await fn(c)
                times[name] = time.perf_counter() - t0
                return out
            steps.append((name, timed))
        results = await pipeline.run_pipeline(ctx, steps)
        done = await records.completed_steps(db, sim_id)
        return {"size": size, "chars": len(doc.read_text()), "agents": agents, "results": results,
                "steps": {n: (done[n]["llm_calls"], done[n]["tokens"], times[n]) for n in done}}
    finally:
        await services.close()


def row(r: dict) -> str:
    cells = [f"{r['size']}x", f"{r['chars']:,}", str(r["results"]["graph"]["entities"]),
             str(r["results"]["environment"]["agents"])]
    total_calls = total_tokens = 0
    for name in ("ontology", "graph", "environment"):
        calls, tokens, secs = r["steps"][name]
        total_calls += calls
        total_tokens += tokens
        cells.append(f"{calls} / {tokens:,} / {secs:.1f}s")
    cells += [str(total_calls), f"{total_tokens:,}"]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| doc | chars | entities | agents | ontology calls/tokens/time | graph calls/tokens/time "
          "| environment calls/tokens/time | calls | tokens |\n|---|---|---|---|---|---|---|---|---|")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--agents", default="5,10,20,40")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    agent_counts = [int(x) for x in args.agents.split(",")]
    embedder = Embedder()
    await embedder.embed(["warm up"])
    with FakeOpenAI() as server, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("Growth with document size (agents = 10):")
        print(HEADER)
        by_size = []
        for size in sizes:
            r = await run_once(server, embedder, work, size, 10)
            by_size.append(r)
            print(row(r), flush=True)
        base = by_size[0]
        print("\nRatios to the 1x document: "
              + ", ".join(f"{r['size']}x: graph calls {r['steps']['graph'][0] / base['steps']['graph'][0]:.1f}x, "
                          f"graph tokens {r['steps']['graph'][1] / base['steps']['graph'][1]:.1f}x"
                          for r in by_size[1:]))
        biggest = max(sizes)
        print(f"\nGrowth with agent count (document {biggest}x):")
        print(HEADER)
        by_agents = []
        for n in agent_counts:
            r = await run_once(server, embedder, work, biggest, n)
            by_agents.append(r)
            print(row(r), flush=True)
        first = by_agents[0]
        print("\nRatios to the first agent count: "
              + ", ".join(f"{r['results']['environment']['agents']} agents: environment calls "
                          f"{r['steps']['environment'][0] / first['steps']['environment'][0]:.1f}x, tokens "
                          f"{r['steps']['environment'][1] / first['steps']['environment'][1]:.1f}x"
                          for r in by_agents[1:]))


if __name__ == "__main__":
    asyncio.run(main())
