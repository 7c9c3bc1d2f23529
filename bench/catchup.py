"""/catchup cost and latency: a channel of N messages since the member's last message there.

A generated team chat (bench/extraction.py's ``team_chat``: topics in runs, small talk, facts and
their corrections) is written by six people into one channel of a SQLite scope through the
product's ingest path (``MemoryEngine.ingest_many``, real MiniLM vectors), right after one message
of the member who asks. Then the catch-up since that message is timed (median of ``--reps``):

* extractive: no LLM, the most central messages of each topic world;
* with an LLM: a fake OpenAI endpoint served by this process that answers at once, without usage,
  so the tokens are the ones our client counts itself (4 characters a token), read back from
  ``llm_usage`` (job ``memory.catchup``), as the budget caps see them.

The baseline, in the same run: the tokens of the naive catch-up, every message of the period in
one prompt (the same line format), which grows with the channel where ours stays bounded by
``[memory] catchup_worlds x catchup_per_world`` messages (``estimate``).

    python -m bench.catchup [--sizes 500 5000] [--reps 5] [--seed 7]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.extraction import team_chat  # noqa: E402
from engine.config import LLMSection, MemorySection  # noqa: E402
from engine.db import open_database  # noqa: E402
from engine.embedder import Embedder  # noqa: E402
from engine.llm import LLMClient  # noqa: E402
from engine.memory import MemoryEngine, MemoryMessage  # noqa: E402
from engine.memory.audience import Viewer  # noqa: E402
from engine.memory.catchup import CHARS_PER_TOKEN, PROMPT_CHARS, SYSTEM_PROMPT, estimate  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, completion  # noqa: E402

SCOPE, CHANNEL = "bench:catchup", "general"
PEOPLE = ["ann", "ben", "chloe", "dana", "eli", "fay"]
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)


def summary(body: dict) -> dict:
    """One point per topic citing its first message; no usage, so our client counts the tokens."""
    cited: dict[int, int] = {}   # topic -> the number of its first message
    topic = None
    for line in body["messages"][-1]["content"].splitlines():
        if line.startswith("Topic "):
            topic = int(line.split()[1].rstrip(":"))
        elif topic is not None and line.startswith("[") and topic not in cited:
            cited[topic] = int(line[1:line.index("]")])
    answer = {"topics": [{"topic": t, "points": [{"text": "what was said", "sources": [n]}]} for t, n in cited.items()]}
    reply = completion(json.dumps(answer))
    del reply["usage"]
    return reply


def naive_tokens(messages: list[MemoryMessage]) -> int:
    """The prompt of a catch-up that sends the whole period: every message, in our line format."""
    chars = len(SYSTEM_PROMPT) + sum(len(f"[{n}] {m.author} ({m.ts:%Y-%m-%d %H:%M}): {m.text[:PROMPT_CHARS]}\n")
                                     for n, m in enumerate(messages, 1))
    return chars // CHARS_PER_TOKEN


async def timed(engine: MemoryEngine, llm: LLMClient, since: datetime, after: int) -> dict:
    """One catch-up without the LLM and one with it, each timed (ms), and their results."""
    out: dict[str, Any] = {}
    for name, client in (("extractive", None), ("llm", llm)):
        engine.llm = client
        start = time.perf_counter()
        out[name] = await engine.catchup(Viewer(SCOPE), CHANNEL, since, after)
        out[name + "_ms"] = (time.perf_counter() - start) * 1000
    engine.llm = None
    return out


async def measure(n: int, reps: int, seed: int, folder: Path) -> dict:
    db = await open_database(folder / f"catchup-{n}.sqlite3")
    cfg = MemorySection()
    engine = MemoryEngine(db, Embedder(), cfg)
    await engine.start()
    try:
        mine = MemoryMessage(SCOPE, CHANNEL, "you-0", "you", "off to the dentist, back this afternoon", T0,
                             author_id="you")
        lines, _ = team_chat(n, seed)
        said = [MemoryMessage(SCOPE, CHANNEL, f"m{i}", PEOPLE[i % len(PEOPLE)], text,
                              T0 + timedelta(seconds=20 * (i + 1)), author_id=PEOPLE[i % len(PEOPLE)])
                for i, text in enumerate(lines)]
        start = time.perf_counter()
        await engine.ingest_many([mine, *said])
        ingest_s = time.perf_counter() - start
        last = await engine.last_said(SCOPE, CHANNEL, "you")
        assert last is not None  # "you" spoke first
        after, since = last
        with FakeOpenAI(summary) as server:
            llm = LLMClient(LLMSection(base_url=server.base_url, model="fake-model"), db)
            try:
                await timed(engine, llm, since, after)   # warm-up (page cache, first request), not counted
                await db.execute("DELETE FROM llm_usage")
                runs = [await timed(engine, llm, since, after) for _ in range(reps)]   # alternated: same load
            finally:
                await llm.close()
        plain, summarised = runs[-1]["extractive"], runs[-1]["llm"]
        extractive_ms = statistics.median(r["extractive_ms"] for r in runs)
        llm_ms = statistics.median(r["llm_ms"] for r in runs)
        usage = await db.fetchone("SELECT sum(calls) AS calls, sum(prompt_tokens) AS p, sum(completion_tokens) AS c "
                                  "FROM llm_usage WHERE job='memory.catchup'")
        calls, tokens = estimate(cfg)
        return {"messages": n, "worlds": len(plain.worlds) + plain.other_worlds, "covered": len(summarised.worlds),
                "summarised": summarised.summarised, "ingest_s": round(ingest_s, 1),
                "extractive_ms": round(extractive_ms, 1), "llm_ms": round(llm_ms, 1),
                "calls": usage["calls"] / reps, "prompt_tokens": usage["p"] / reps,
                "completion_tokens": usage["c"] / reps, "estimate": {"calls": calls, "tokens": tokens},
                "naive_prompt_tokens": naive_tokens(said)}
    finally:
        await engine.close()
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            print(json.dumps(asyncio.run(measure(n, args.reps, args.seed, Path(tmp)))), flush=True)


if __name__ == "__main__":
    main()
