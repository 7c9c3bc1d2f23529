"""Memory from the terminal: `import` a chat export, list `worlds`, `merge` worlds now.

They may run while the bot runs on the same database: the bot notices what they changed
(memory_scope_stamps) and reloads the scopes concerned before it next routes or recalls.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.memory.importers import FORMATS, ImportFileError, load_history
from engine.memory.sim_scopes import is_sim_scope
from engine.offload import run_cpu
from engine.words import plural

IMPORT_HELP = """Replay a chat export into memory, oldest message first, with batched embeddings.
Formats: JSONL (one {"id", "channel", "author", "ts" ISO-8601, "text"} object per line), a
Telegram Desktop export (result.json, one chat or the full export) or a DiscordChatExporter
JSON file; auto detects which from the content. Messages already stored (same scope, channel
and id) are skipped, so an interrupted import can simply be run again.

The scope is the memory space the worlds belong to; nothing crosses scopes. It defaults to
import:<file name without extension>. To add the history to a chat the bot serves, give that
chat's scope: discord:<guild id>, telegram:<chat id> or console:local."""


def register(sub) -> None:
    p = sub.add_parser("import", help="replay a chat export (JSONL, Telegram, Discord) into memory",
                       description=IMPORT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE")
    p.add_argument("--scope", help="memory scope (default: import:<file stem>)")
    p.add_argument("--format", choices=["auto", *FORMATS], default="auto", help="file format (default: auto)")
    p.set_defaults(func=import_)

    w = sub.add_parser("worlds", help="list the worlds of a scope with the ids of the messages they hold")
    w.add_argument("--scope", help="only this scope (default: every chat's scope; a simulation's posts: sim:ID)")
    w.add_argument("--json", action="store_true", help="print a JSON list of worlds")
    w.set_defaults(func=worlds)

    m = sub.add_parser("merge", help="run memory upkeep now: decay beliefs, merge near-duplicate worlds, "
                                     "remove dead ones, rename grown ones")
    m.add_argument("--scope", help="only this scope (default: every scope)")
    m.set_defaults(func=merge)


async def open_memory(config):
    """The database and a started memory engine, as every memory command uses them."""
    db = await open_database(config.db_url)
    engine = MemoryEngine(db, Embedder.from_config(config.embedder), config.memory)
    await engine.start()
    return db, engine


async def close_memory(db, engine) -> None:
    await engine.close()
    await db.close()


async def import_(args, config) -> int:
    path = Path(args.file)
    scope = args.scope or f"import:{path.stem}"
    try:
        fmt, messages = await run_cpu(load_history, path, scope, args.format)
    except ImportFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not messages:
        print(f"{path}: no messages with text to import ({fmt})")
        return 0
    db, engine = await open_memory(config)
    try:
        with tqdm(total=len(messages), desc=f"import {fmt}", unit="msg", file=sys.stderr) as bar:
            def progress(done: int, total: int) -> None:
                bar.update(done - bar.n)
            results = await engine.ingest_many(messages, progress)
        await engine.flush()  # name the worlds now rather than after the process is gone
        infos = await engine.worlds(Viewer.operator(scope))
    finally:
        await close_memory(db, engine)
    born = sum(r.action == "birth" for r in results)
    skipped = len(messages) - len(results)
    print(f"imported {plural(len(results), 'message')} from {path} ({fmt}) into scope {scope}: "
          f"{plural(born, 'world')} born, {plural(len(infos), 'world')} in the scope"
          + (f"; {skipped} already stored, skipped" if skipped else ""))
    return 0


async def _scopes(db, scope: str | None, chats_only: bool = False) -> list[str]:
    """``scope``, or every scope with worlds (``chats_only``: not simulations' scopes)."""
    if scope:
        return [scope]
    found = [r["scope"] for r in await db.fetchall("SELECT DISTINCT scope FROM worlds ORDER BY scope")]
    return [s for s in found if not (chats_only and is_sim_scope(s))]


async def worlds(args, config) -> int:
    db, engine = await open_memory(config)
    try:
        out = []
        for scope in await _scopes(db, args.scope, chats_only=True):
            held = await engine.messages_of(scope)
            for w in await engine.worlds(Viewer.operator(scope)):  # the operator sees every audience
                out.append({"scope": scope, "audience": w.audience, "id": w.id, "topic": w.topic,
                            "maturity": round(w.maturity, 4),
                            "access_count": w.access_count, "beliefs": w.beliefs, "evidence": w.evidence,
                            "created_at": w.created_at.isoformat(), "last_active": w.last_active.isoformat(),
                            "messages": held.get(w.id, [])})
    finally:
        await close_memory(db, engine)
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    if not out:
        print(f"no worlds in scope {args.scope}" if args.scope else "no worlds yet")
        return 0
    scope = None
    for w in out:
        if w["scope"] != scope:
            scope = w["scope"]
            print(f"{scope}:")
        ids = w["messages"]
        shown = ", ".join(ids[:12]) + (f", … (+{len(ids) - 12})" if len(ids) > 12 else "")
        audience = f" [audience {w['audience']}]" if w["audience"] else ""
        print(f"  {w['id']}{audience}  {w['topic'] or '(unnamed)'} — maturity {w['maturity']:.2f}, "
              f"accessed {w['access_count']}, {plural(w['beliefs'], 'belief')}, {plural(w['evidence'], 'message')}: {shown}")
    return 0


async def merge(args, config) -> int:
    db, engine = await open_memory(config)
    try:
        totals = await engine.maintain(args.scope)
    finally:
        await close_memory(db, engine)
    where = f"scope {args.scope}" if args.scope else "every scope"
    print(f"{where}: merged {plural(totals['merged'], 'pair')} of worlds, removed {totals['removed']} empty ones, "
          f"decayed {plural(totals['decayed'], 'belief')}, renamed {plural(totals['renamed'], 'world')}")
    return 0
