"""`python -m bot recall`: ask memory from the terminal, for people, scripts and benchmarks.

One query (`recall --scope S QUERY`) or a file of them (`--queries FILE.jsonl`, one
``{"id", "query"}`` object per line) goes through ``MemoryEngine.recall`` exactly as `/recall`
does, as the operator (every audience of the scope is visible, as in `worlds`). `--json`
prints one JSON object per query and line: the returned messages with their platform message
ids, channel, world, score and neighbour mark (the hit a neighbouring turn was brought in to
complete), the beliefs, and the time recall took. Without it, a readable list.

Bad input never reaches the engine: a missing file, a line that is not a JSON object with a
text ``query``, or a scope that holds no memory is one ``error:`` line and exit status 2.
The whole query file is read and checked before the first query runs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bot.cli.memory import open_memory
from engine.memory import records
from engine.memory.audience import Viewer
from engine.memory.importers import ImportFileError, jsonl_objects, read_text
from engine.memory.models import Belief, Evidence, RecallResult

RECALL_HELP = """Ask memory what it holds about a query, as /recall does, and print what it returns.

Give one QUERY, or --queries FILE.jsonl with one {"id", "query"} object per line (for scripts
and benchmarks: with --json, one JSON line per query comes out, in the file's order)."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def register(sub) -> None:
    p = sub.add_parser("recall", help="ask memory about a query (or a JSONL file of queries) and print the result",
                       description=RECALL_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("query", nargs="*", metavar="QUERY", help="the query (words may be given unquoted)")
    p.add_argument("--scope", required=True, help="memory scope, e.g. discord:<guild id>, import:<file stem>")
    p.add_argument("--k", type=positive_int, help="messages (neighbours included) and beliefs to return "
                                                  "(default: [memory] recall_k)")
    p.add_argument("--queries", metavar="FILE.jsonl", help='one {"id", "query"} object per line')
    p.add_argument("--json", action="store_true", help="one JSON object per query and line")
    p.set_defaults(func=recall)


def read_queries(path: Path) -> list[tuple[object, str]]:
    """(id, query) pairs of a JSONL file, in order; blank lines are skipped. A line without an
    ``id`` gets its line number. A file that cannot be used raises ImportFileError in one line."""
    out = []
    for number, row in jsonl_objects(path, read_text(path), '"id" and "query"'):
        query = row.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ImportFileError(f"{path}: line {number}: \"query\" must be non-empty text")
        out.append((row.get("id", number), query.strip()))
    return out


def topic_of(result: RecallResult, world_id: str) -> str:
    """A result's world topic: carried by the evidence, else by the result's worlds."""
    if world_id in result.worlds:
        return result.worlds[world_id].topic
    if result.world is not None and result.world.id == world_id:
        return result.world.topic
    return ""


def message_json(e: Evidence, result: RecallResult, platform_ids: dict[int, str]) -> dict:
    return {"message_id": e.message_id, "channel": e.channel, "author": e.author, "ts": e.ts.isoformat(),
            "world_id": e.world_id, "world_topic": e.world_topic or topic_of(result, e.world_id),
            "score": round(float(e.score), 6), "neighbour": e.neighbour_of is not None,
            "neighbour_of": platform_ids.get(e.neighbour_of) if e.neighbour_of is not None else None,
            "text": e.text}


def belief_json(b: Belief) -> dict:
    return {"id": b.id, "world_id": b.world_id, "subject": b.subject, "predicate": b.predicate,
            "object": b.object, "confidence": round(float(b.confidence), 4), "score": round(float(b.score), 6),
            "sources": b.sources}


def result_json(qid: object, query: str, result: RecallResult, ms: float) -> dict:
    platform_ids = {e.id: e.message_id for e in result.evidence}
    world = result.world
    return {"id": qid, "query": query, "found": result.found, "ms": round(ms, 3),
            "world": None if world is None else {"id": world.id, "topic": world.topic,
                                                 "similarity": round(float(result.similarity), 6)},
            "worlds": sorted({e.world_id for e in result.evidence} | {b.world_id for b in result.beliefs}),
            "messages": [message_json(e, result, platform_ids) for e in result.evidence],
            "beliefs": [belief_json(b) for b in result.beliefs]}


def result_text(row: dict) -> str:
    lines = [f"{row['query']}  ({row['ms']:.0f} ms)"]
    if not row["found"]:
        lines.append("  memory holds nothing about that")
        return "\n".join(lines)
    for n, m in enumerate(row["messages"], 1):
        text = m["text"] if len(m["text"]) <= 160 else m["text"][:159] + "…"
        mark = f"  (neighbour of {m['neighbour_of'] or 'a hit'})" if m["neighbour"] else ""
        topic = f" “{m['world_topic']}”" if m["world_topic"] else ""
        lines.append(f"  {n}. {m['score']:.4f}  #{m['channel']} {m['message_id']}  {m['author']}, "
                     f"{m['ts'][:16].replace('T', ' ')}  [world {m['world_id']}{topic}]{mark}")
        lines.append(f"       {text}")
    if row["beliefs"]:
        lines.append("  beliefs:")
        lines += [f"    B{b['id']} {b['subject']} — {b['predicate']} — {b['object']} ({b['confidence']:.2f}) "
                  f"[world {b['world_id']}]" for b in row["beliefs"]]
    return "\n".join(lines)


async def recall(args, config) -> int:
    if bool(args.query) == bool(args.queries):
        print("error: give either a QUERY or --queries FILE.jsonl", file=sys.stderr)
        return 2
    try:
        queries = read_queries(Path(args.queries)) if args.queries else [(1, " ".join(args.query).strip())]
    except ImportFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not all(q for _, q in queries):
        print("error: the query is empty", file=sys.stderr)
        return 2
    services = await open_memory(config)
    engine = services.memory
    try:
        scopes = await records.scopes(services.db)
        if args.scope not in scopes:
            shown = ", ".join(scopes[:10]) + (", …" if len(scopes) > 10 else "")
            print(f"error: scope {args.scope!r} holds no memory"
                  + (f" (scopes with memory: {shown})" if scopes else " (this database holds no memory yet)"),
                  file=sys.stderr)
            return 2
        viewer = Viewer.operator(args.scope)
        await engine.embedder.embed([queries[0][1]], kind="query")  # load the model before timing: "ms" is recall alone
        for qid, query in queries:
            t0 = time.perf_counter()
            result = await engine.recall(viewer, query, args.k)
            row = result_json(qid, query, result, (time.perf_counter() - t0) * 1000)
            print(json.dumps(row, ensure_ascii=False) if args.json else result_text(row), flush=True)
    finally:
        await services.close()
    return 0
