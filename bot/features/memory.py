"""Memory commands (/worlds, /world, /recall, /ask, /forget, /memory) and the listener that
remembers every plain message the app hands it (the app skips channels that opted out).

Messages go through an IngestQueue (engine.memory.ingest_queue): stored in batches, in order,
with backpressure; commands wait for their channel's earlier messages (``App.settled``).
Administrators decide what a channel remembers (/memory, /forget, /forget all); any member
may make the bot forget their own messages in this server or chat (/forget me)."""
from __future__ import annotations

import time
from datetime import datetime, timezone

from bot.app import MEMORY_SETTING
from bot.commands.registry import Arg, CommandContext, UsageError
from bot.neutral import Incoming
from bot.permissions import ADMIN, EVERYONE, ByAction
from engine.llm.client import person_waiting
from engine.llm.errors import LLMError
from engine.memory import MemoryEngine, MemoryMessage, RecallResult, WorldInfo
from engine.memory.audience import Viewer
from engine.memory.ingest_queue import IngestQueue
from engine.memory.models import Belief, Evidence
from engine.words import plural

CONFIRM_WINDOW_S = 60.0
ME, EVERYWHERE = "me", None  # what a pending /forget deletes besides one channel


def ago(ts: datetime) -> str:
    seconds = (datetime.now(timezone.utc) - ts).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def world_sizes(w: WorldInfo) -> str:
    return f"maturity {w.maturity:.2f} · {plural(w.evidence, 'message')} · {plural(w.beliefs, 'belief')}"


def belief_line(b: Belief) -> str:
    line = f"[B{b.id}] {b.subject} — {b.predicate} — {b.object} ({b.confidence:.2f})"
    if not b.active:
        line = f"✗ {line} · superseded {b.invalid_at:%Y-%m-%d}" + (f" by B{b.superseded_by}" if b.superseded_by else "")
    return line


def evidence_line(e: Evidence) -> str:
    text = e.text if len(e.text) <= 200 else e.text[:199] + "…"
    return f"[M{e.id}] {e.author}, {e.ts:%Y-%m-%d %H:%M}: {text}"


NOTHING_FOUND = "Memory holds nothing about that."


def recall_text(result: RecallResult) -> str:
    """What recall found, across worlds: the worlds it comes from, then beliefs and messages
    (a neighbour turn brought in to complete a hit is marked ↳)."""
    if result.world is None:
        return "Nothing remembered in this server or chat yet."
    if not result.found:
        return NOTHING_FOUND
    lines = ["From " + ", ".join(f"`{w.id}` “{w.topic}”" for w in result.worlds.values()) + ":"]
    if result.beliefs:
        lines += ["Beliefs:"] + [f"  {belief_line(b)}" for b in result.beliefs]
    if result.evidence:
        lines += ["Messages:"] + [("    ↳ " if e.neighbour_of else "  ") + evidence_line(e) for e in result.evidence]
    return "\n".join(lines)


def searched(engine: MemoryEngine, text: str) -> str:
    """The search text, or one line saying it is too long (it would only slow the search)."""
    if len(text) > engine.max_query_chars:
        raise UsageError(f"that is {len(text):,} characters; a search takes at most {engine.max_query_chars:,}.")
    return text


def viewer(ctx: CommandContext) -> Viewer:
    """Memory answers in a channel show only what that channel's audience can read."""
    return Viewer(ctx.scope, ctx.message.audience)


def setup(app) -> None:
    cfg = app.config
    embedder = app.embedder
    engine = MemoryEngine(app.db, embedder, cfg.memory)
    app.services["memory"] = engine
    queue = IngestQueue(engine, cfg.memory.ingest_queue_max, cfg.memory.ingest_batch_max,
                        cfg.memory.ingest_batch_wait_ms)
    reg = app.commands
    # (scope, channel, author) -> (this channel's id, ME or EVERYWHERE; when asked)
    pending_forget: dict[tuple[str, str, str], tuple[str | None, float]] = {}

    async def start() -> None:
        engine.llm = app.services.get("llm")
        await embedder.load_now_unless_packaged()  # a model of the user's own: fail at start, not per message
        embedder.warm()  # load the model in the background; /help does not wait
        await engine.start()
        queue.start()

    async def stop() -> None:
        await queue.close()
        await engine.close()
        await embedder.settle()

    app.on_start.append(start)
    app.on_stop.append(stop)
    app.on_audiences.append(engine.set_audiences)

    async def remember(msg: Incoming) -> None:
        if not cfg.memory.enabled or not msg.text.strip():
            return
        files = tuple(part for a in msg.attachments for part in (a.filename, a.caption) if part)
        await queue.put(MemoryMessage(msg.scope, msg.channel, msg.message_id, msg.author_name, msg.text, msg.ts,
                                      author_id=msg.author_id, audience=msg.audience, attachments=files))

    app.listeners.append(remember)
    app.settle_hooks.append(queue.settled)

    @reg.command("worlds", "The topic worlds remembered here", group="memory")
    async def worlds(ctx: CommandContext) -> None:
        found = await engine.worlds(viewer(ctx))
        if not found:
            await ctx.reply.send("No worlds yet: nothing remembered in this server or chat.")
            return
        lines = [f"{plural(len(found), 'world')}, most recently active first:"]
        for w in found[:30]:
            lines.append(f"`{w.id}` {w.topic} — {world_sizes(w)} · active {ago(w.last_active)}")
        if len(found) > 30:
            lines.append(f"… and {len(found) - 30} more. /world <name or id> shows one.")
        await ctx.reply.send("\n".join(lines))

    @reg.command("world", "One world's beliefs, newest first (superseded ones marked ✗)",
                 [Arg("name", "world id or topic words", type="text")], group="memory")
    async def world(ctx: CommandContext) -> None:
        found = await engine.world(viewer(ctx), searched(engine, ctx.args["name"]))
        if found is None:
            raise UsageError(f"no world matches {ctx.args['name']!r}. /worlds lists them.")
        w, beliefs = found
        lines = [f"World `{w.id}` “{w.topic}” — {world_sizes(w)} · born {w.created_at:%Y-%m-%d} · "
                 f"active {ago(w.last_active)}"]
        lines += [belief_line(b) for b in beliefs[:40]]
        if not beliefs:
            recent = await engine.recent_messages(viewer(ctx), w.id)
            lines += ["No beliefs extracted yet. Its latest messages:"] + [f"  {evidence_line(e)}" for e in recent]
        if len(beliefs) > 40:
            lines.append(f"… and {len(beliefs) - 40} older ones.")
        await ctx.reply.send("\n".join(lines))

    @reg.command("recall", "What memory holds about something: its world, beliefs and messages",
                 [Arg("query", "what to look for", type="text")], group="memory")
    async def recall(ctx: CommandContext) -> None:
        await ctx.reply.send(recall_text(await engine.recall(viewer(ctx), searched(engine, ctx.args["query"]))))

    @reg.command("ask", "Answer a question from memory, citing what it rests on",
                 [Arg("question", "your question", type="text")], group="memory")
    async def ask(ctx: CommandContext) -> None:
        try:
            async with ctx.reply.typing():
                with person_waiting():
                    result = await engine.ask(viewer(ctx), searched(engine, ctx.args["question"]))
        except LLMError as err:
            await ctx.reply.send(f"⚠ {err} Here is what memory holds:\n"
                                 + recall_text(await engine.recall(viewer(ctx), ctx.args["question"])))
            return
        if not result.recall.found:
            await ctx.reply.send(recall_text(result.recall))  # nothing to answer from: no LLM call was made
            return
        if result.answer is None:
            note = "No language model is configured, so here is what memory holds instead of an answer:\n"
            await ctx.reply.send(note + recall_text(result.recall))
            return
        await ctx.reply.send(f"{result.answer}\n\nSources:\n{recall_text(result.recall)}")

    @reg.command("forget", "Forget this channel's memory (admins), everything here (all, admins) or "
                 "your own messages (me); then /forget confirm", [
                     Arg("what", "all, me or confirm", type="choice", choices=("all", "me", "confirm"),
                         required=False)], group="memory",
                 permission=ByAction("what", {"me": EVERYONE, "confirm": EVERYONE}, default=ADMIN))
    async def forget(ctx: CommandContext) -> None:
        msg = ctx.message
        key = (ctx.scope, msg.channel, msg.author_id)
        what = ctx.args.get("what")
        if what == "confirm":
            request = pending_forget.pop(key, None)
            if request is None or time.monotonic() - request[1] > CONFIRM_WINDOW_S:
                raise UsageError("nothing to confirm: type /forget (or /forget all, /forget me) first, then "
                                 f"/forget confirm within {CONFIRM_WINDOW_S:.0f} s.")
            target = request[0]
            if target == ME:
                counts = await engine.forget_author(ctx.scope, msg.author_id)
                where = "your messages here"
            else:
                counts = await engine.forget(ctx.scope, target)
                where = "this channel" if target else "this server or chat"
            await ctx.reply.send(f"Forgot {where}: {plural(counts['messages'], 'message')}, "
                                 f"{plural(counts['beliefs'], 'belief')}, {plural(counts['worlds'], 'world')} removed.")
            return
        if what == "me" and not msg.author_id:
            raise UsageError("this message has no author the bot can tell apart: nothing of yours to forget.")
        target = {"all": EVERYWHERE, "me": ME}.get(what, msg.channel)
        pending_forget[key] = (target, time.monotonic())
        where = {"all": "everything remembered in this server or chat",
                 "me": "every message of yours remembered in this server or chat (and the beliefs resting "
                       "only on them)"}.get(what, "this channel's memory")
        await ctx.reply.send(f"This deletes {where} for good. Type /forget confirm within "
                             f"{CONFIRM_WINDOW_S:.0f} s to go ahead.")

    @reg.command("memory", "Turn remembering this channel's messages on or off",
                 [Arg("state", "on or off", type="choice", choices=("on", "off"))], permission=ADMIN,
                 group="memory")
    async def memory(ctx: CommandContext) -> None:
        state = ctx.args["state"]
        await app.set_setting(ctx.scope, ctx.message.channel, MEMORY_SETTING, state)
        await ctx.reply.send("I remember this channel's messages again." if state == "on" else
                             "I no longer remember this channel's messages (what I already hold stays; "
                             "/forget clears it).")
