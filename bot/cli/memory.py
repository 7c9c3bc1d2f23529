"""Memory from the terminal: `import` a chat export, list `worlds`, `merge` worlds now, `export`
what memory holds of one member, and `memory reembed` the stored vectors with the configured
embedding model.

They may run while the bot runs on the same database: the bot notices what they changed
(memory_scope_stamps) and reloads the scopes concerned before it next routes or recalls.
`memory reembed` is the exception: stop the bot first (engine/vector_model.py says why).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from engine import vector_model
from engine.memory import records
from engine.memory.audience import Viewer
from engine.memory.importers import FORMATS, ImportFileError, load_history
from engine.memory.members import write_export
from engine.memory.sim_scopes import is_sim_scope
from engine.offload import run_cpu
from engine.services import Services, open_services
from engine.words import in_english, plural

IMPORT_HELP = """Replay a chat export into memory, oldest message first, with batched embeddings.
Formats: JSONL (one {"id", "channel", "author", "ts" ISO-8601, "text"} object per line), a
Telegram Desktop export (result.json, one chat or the full export) or a DiscordChatExporter
JSON file; auto detects which from the content. Messages already stored (same scope, channel
and id) are skipped, so an interrupted import can simply be run again. So are the messages of
members who turned memory off for themselves in the scope (/memory off me): matched by author id
where the export gives one (Discord, Telegram, JSONL's optional "author_id"), else by the name
they last had there; the summary says how many were left out and how.

The scope is the memory space the worlds belong to; nothing crosses scopes. It defaults to
import:<file name without extension>. To add the history to a chat the bot serves, give that
chat's scope: discord:<guild id>, telegram:<chat id> or console:local."""


REEMBED_HELP = """Refit every stored vector (messages, beliefs, world centroids, simulation graphs)
with the configured [embedder] model, in batches; an interrupted run resumes where it stopped.
The database records which model its vectors come from, and the bot refuses to start with
another: run this after changing [embedder] model, with the bot stopped."""


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

    e = sub.add_parser("export", help="write one member's messages in a scope and the beliefs resting on them "
                                      "(JSON and Markdown), as /export me sends them")
    e.add_argument("--scope", required=True, help="the memory scope, e.g. discord:<guild id> or telegram:<chat id>")
    e.add_argument("--author", required=True, metavar="A",
                   help="the member's platform id; for imported history without ids, their name")
    e.add_argument("--out", metavar="DIR", help="folder for the files (default: <data_dir>/exports)")
    e.set_defaults(func=export)

    mem = sub.add_parser("memory", help="memory maintenance: reembed")
    actions = mem.add_subparsers(dest="action", metavar="<action>", required=True)
    r = actions.add_parser("reembed", help="refit every stored vector with the configured embedding model",
                           description=REEMBED_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--batch", type=int, default=vector_model.REFIT_BATCH, metavar="ROWS",
                   help=f"rows embedded and written per transaction (default {vector_model.REFIT_BATCH})")
    r.set_defaults(func=reembed)


async def open_memory(config) -> Services:
    """The services with memory started, as every memory command uses them: no LLM (belief
    extraction and LLM topic names are the bot's), no simulations, no jobs."""
    services = await open_services(config, llm=False, sims=False)
    try:
        await services.start(jobs=False)
    except BaseException:
        await services.close()
        raise
    return services


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
    services = await open_memory(config)
    engine = services.memory
    try:
        kept, withheld = await engine.withhold(messages)
        with tqdm(total=len(kept), desc=f"import {fmt}", unit="msg", file=sys.stderr) as bar:
            def progress(done: int, total: int) -> None:
                bar.update(done - bar.n)
            results = await engine.ingest_many(kept, progress)
        await engine.flush()  # name the worlds now rather than after the process is gone
        infos = await engine.worlds(Viewer.operator(scope))
    finally:
        await services.close()
    born = sum(r.action == "birth" for r in results)
    skipped = len(kept) - len(results)
    print(f"imported {plural(len(results), '{n} message', '{n} messages')} from {path} ({fmt}) into scope {scope}: "
          f"{plural(born, '{n} world', '{n} worlds')} born, "
          f"{plural(len(infos), '{n} world', '{n} worlds')} in the scope"
          + (f"; {skipped} already stored, skipped" if skipped else "") + left_out(withheld))
    return 0


def left_out(withheld) -> str:
    """How many messages of members who opted out were left out, and how they were told apart."""
    if not withheld.total:
        return ""
    how = []
    if withheld.by_id:
        how.append(f"{withheld.by_id} by author id")
    if withheld.by_name:
        how.append(f"{withheld.by_name} by author name, as the export gives no id for them")
    return (f"; left out "
            f"{plural(withheld.total, '{n} message', '{n} messages')} of members who turned memory off for themselves "
            f"here ({', '.join(how)})")


async def _scopes(db, scope: str | None, chats_only: bool = False) -> list[str]:
    """``scope``, or every scope with worlds (``chats_only``: not simulations' scopes)."""
    if scope:
        return [scope]
    found = await records.scopes(db)
    return [s for s in found if not (chats_only and is_sim_scope(s))]


async def worlds(args, config) -> int:
    services = await open_memory(config)
    engine = services.memory
    try:
        out: list[dict[str, Any]] = []
        for scope in await _scopes(services.db, args.scope, chats_only=True):
            held = await engine.messages_of(scope)
            # the operator sees every audience, and the archived worlds too
            for w in await engine.worlds(Viewer.operator(scope), archived=True):
                out.append({"scope": scope, "audience": w.audience, "id": w.id, "topic": w.topic,
                            "archived_at": w.archived_at.isoformat() if w.archived_at else None,
                            "maturity": round(w.maturity, 4),
                            "access_count": w.access_count, "beliefs": w.beliefs, "evidence": w.evidence,
                            "created_at": w.created_at.isoformat(), "last_active": w.last_active.isoformat(),
                            "messages": held.get(w.id, [])})
    finally:
        await services.close()
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    if not out:
        print(f"no worlds in scope {args.scope}" if args.scope else "no worlds yet")
        return 0
    heading = None
    for row in out:
        if row["scope"] != heading:
            heading = row["scope"]
            print(f"{heading}:")
        ids = row["messages"]
        shown = ", ".join(ids[:12]) + (f", … (+{len(ids) - 12})" if len(ids) > 12 else "")
        audience = f" [audience {row['audience']}]" if row["audience"] else ""
        audience += f" [archived {row['archived_at'][:10]}]" if row["archived_at"] else ""
        print(f"  {row['id']}{audience}  {row['topic'] or '(unnamed)'} — maturity {row['maturity']:.2f}, "
              f"accessed {row['access_count']}, {plural(row['beliefs'], '{n} belief', '{n} beliefs')}, "
              f"{plural(row['evidence'], '{n} message', '{n} messages')}: {shown}")
    return 0


async def merge(args, config) -> int:
    services = await open_memory(config)
    try:
        totals = await services.memory.maintain(args.scope)
    finally:
        await services.close()
    where = f"scope {args.scope}" if args.scope else "every scope"
    print(f"{where}: merged "
          f"{plural(totals['merged'], '{n} pair', '{n} pairs')} of worlds, removed {totals['removed']} empty ones, "
          f"decayed "
          f"{plural(totals['decayed'], '{n} belief', '{n} beliefs')} (retired {totals['retired']} below the floor), "
          f"archived {plural(totals['archived'], '{n} quiet world', '{n} quiet worlds')}, renamed "
          f"{plural(totals['renamed'], '{n} world', '{n} worlds')}")
    return 0


async def export(args, config) -> int:
    services = await open_memory(config)
    try:
        data = await services.memory.export_member(args.scope, author_id=args.author, author_name=args.author)
    finally:
        await services.close()
    if not data["messages"]:
        print(f"error: memory holds no message of {args.author} in scope {args.scope}", file=sys.stderr)
        return 2
    folder = Path(args.out).expanduser() if args.out else config.data_dir / "exports"
    stem = "member-" + "".join(c if c.isalnum() else "_" for c in f"{args.scope}-{args.author}")
    for path in write_export(data, folder, stem):
        print(path)
    print(f"{plural(len(data['messages']), '{n} message', '{n} messages')} and "
          f"{plural(len(data['beliefs']), '{n} belief', '{n} beliefs')} resting on "
          "them", file=sys.stderr)
    return 0


async def reembed(args, config) -> int:
    if args.batch < 1:
        print("error: --batch must be at least 1", file=sys.stderr)
        return 2
    services = await open_services(config, llm=False, sims=False)   # not started: memory refuses other vectors
    db, embedder = services.db, services.embedder
    try:
        before = await vector_model.stored(db)
        todo = await vector_model.pending(db, embedder.model_name)
        total = sum(todo.values())
        source = f"from {before[0]} " if before else ""
        print(f"refitting {in_english(total, '{n} vector', '{n} vectors')} {source}with {embedder.model_name}: "
              + ", ".join(f"{table} {n}" for table, n in todo.items()))
        if waiting := await records.pending_count(db):
            them = "it" if waiting == 1 else "them"
            print(f"{in_english(waiting, '{n} stored message waits', '{n} stored messages wait')} for a first "
                  f"vector: the bot embeds {them} with {embedder.model_name} when it starts")
        with tqdm(total=total, desc="reembed", unit="vec", file=sys.stderr) as bar:
            def progress(table: str, rows: int) -> None:
                bar.set_postfix_str(table, refresh=False)
                bar.update(rows)
            done = await vector_model.reembed(db, embedder, progress, args.batch)
    finally:
        await services.close()
    print(f"stored vectors now come from {embedder.model_name}: "
          + ", ".join(f"{table} {n}" for table, n in done.items() if table != "worlds")
          + f"; {in_english(done['worlds'], '{n} world', '{n} worlds')} recentred")
    return 0
