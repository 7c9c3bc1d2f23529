"""Memory commands (/worlds, /world, /recall, /ask, /forget, /memory) and the listener that
remembers every plain message the app hands it (the app skips channels that opted out).

``--sim ID`` makes /worlds, /world and /recall read a simulation's memory scope (what its agents
posted, engine.sim.sim_memory) instead of the chat's: only a simulation of this server or chat,
and then everything of it (every member may read a simulation's scope).

Messages go through an IngestQueue (engine.memory.ingest_queue): stored in batches, in order,
with backpressure; commands wait for their channel's earlier messages (``App.settled``).
Administrators decide what a channel remembers (/memory, /forget, /forget all); any member
may make the bot forget their own messages in this server or chat (/forget me), stop it storing
them (/memory off me: the engine leaves them out on every path into storage), or forget one
message they wrote (/forget message: its author or an administrator) or one belief resting only
on what they said (/forget belief: the author of every message it rests on, or an
administrator). Every deletion waits for /forget confirm; the one-message and one-belief
deletions, and the opt-out, are answered to the asker alone (Command.private), so nothing of
what is being forgotten is posted again for all to see. What other features keep of what was
said goes with it through ``App.on_forget`` (report chat)."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from bot.app import MEMORY_SETTING, Forgotten
from bot.commands.registry import Arg, CommandContext, MessageAction, UsageError
from bot.neutral import Incoming
from bot.permissions import ADMIN, EVERYONE, ByAction, StarterOrAdmin, costly
from bot.public import public
from engine.i18n import N_, _
from engine.llm.client import person_waiting
from engine.llm.errors import LLMError
from engine.memory import MemoryEngine, MemoryMessage, RecallResult, WorldInfo
from engine.memory.audience import Viewer
from engine.memory.ingest_queue import IngestQueue
from engine.memory.members import StoredMessage
from engine.memory.models import Belief, Evidence
from engine.memory.sim_scopes import sim_scope
from engine.sim.simulations import not_here
from engine.words import plural

CONFIRM_WINDOW_S = 60.0
MEMORY_ID = re.compile(r"^\[?M(\d+)\]?$", re.I)    # [M12] as recall and /ask cite a message
BELIEF_ID = re.compile(r"^\[?B?(\d+)\]?$", re.I)   # [B7], B7 or 7


@dataclass
class Pending:
    """A /forget waiting for /forget confirm: what it deletes and when it was asked."""
    kind: str       # 'channel', 'all', 'me', 'message' or 'belief'
    target: Any     # the channel id; the message's memory id; the belief id
    asked: float
    beyond: Forgotten | None = None   # what other features drop with it (App.on_forget); None: nothing


def engine_of(ctx: CommandContext) -> MemoryEngine:
    return ctx.app.memory


async def named_message(ctx: CommandContext) -> StoredMessage | None:
    """The stored message /forget message names: a message link, its [M..] id (as /recall cites it),
    its platform id, or, with no target, the message the command replies to (Telegram's reply,
    Discord's message menu). Only a message the channel's audience reads, or the asker's own;
    None when the target names no such message (or is no message reference at all)."""
    target, msg = (ctx.args.get("target") or "").strip(), ctx.message
    find = engine_of(ctx).find_message
    if not target:
        return (await find(ctx.viewer, msg.author_id, platform_id=msg.reply_to, channel=msg.channel)
                if msg.reply_to else None)
    if found := MEMORY_ID.match(target):
        return await find(ctx.viewer, msg.author_id, row_id=int(found.group(1)))
    link = msg.conventions.message_link(target) if msg.conventions.message_link else None
    if link is not None:
        scope, channel, platform_id = link
        if scope is not None and scope != ctx.scope:
            return None  # a message of another server or chat: nothing of it is here
        return await find(ctx.viewer, msg.author_id, platform_id=platform_id, channel=channel or msg.channel)
    if target.isdigit():
        return await find(ctx.viewer, msg.author_id, platform_id=target, channel=msg.channel)
    return None


async def author_of_message(ctx: CommandContext) -> str | None:
    found = await named_message(ctx)
    return None if found is None else found.author_id


async def author_of_belief(ctx: CommandContext) -> str | None:
    """The one author of every message the named belief rests on ('' when several people, or
    none known: only administrators may forget it); None when it names no belief here."""
    found = await named_belief(ctx)
    if found is None:
        return None
    authors = found[1]
    return next(iter(authors)) if len(authors) == 1 else ""


async def named_belief(ctx: CommandContext) -> tuple[Belief, set[str]] | None:
    found = BELIEF_ID.match((ctx.args.get("target") or "").strip())
    return await engine_of(ctx).find_belief(ctx.viewer, int(found.group(1))) if found else None


def ago(ts: datetime) -> str:
    seconds = (datetime.now(timezone.utc) - ts).total_seconds()
    for unit, size in ((N_("{n}d ago"), 86400), (N_("{n}h ago"), 3600), (N_("{n}m ago"), 60)):
        if seconds >= size:
            return _(unit, n=int(seconds // size))
    return _("just now")


def world_sizes(w: WorldInfo) -> str:
    return _("maturity {maturity} · {messages} · {beliefs}", maturity=f"{w.maturity:.2f}",
             messages=plural(w.evidence, "{n} message", "{n} messages"),
             beliefs=plural(w.beliefs, "{n} belief", "{n} beliefs"))


def belief_line(b: Belief) -> str:
    line = f"[B{b.id}] {b.subject} — {b.predicate} — {b.object} ({b.confidence:.2f})"
    if not b.active:
        line = (_("✗ {belief} · superseded {date} by B{by}", belief=line, date=f"{b.invalid_at:%Y-%m-%d}",
                  by=b.superseded_by) if b.superseded_by else
                _("✗ {belief} · superseded {date}", belief=line, date=f"{b.invalid_at:%Y-%m-%d}"))
    return line


def evidence_line(e: Evidence) -> str:
    text = e.text if len(e.text) <= 200 else e.text[:199] + "…"
    return f"[M{e.id}] {e.author}, {e.ts:%Y-%m-%d %H:%M}: {text}"


NOTHING_FOUND = N_("Memory holds nothing about that.")
HERE = N_("this server or chat")


def recall_text(result: RecallResult, where: str = "") -> str:
    """What recall found, across worlds: the worlds it comes from, then beliefs and messages
    (a neighbour turn brought in to complete a hit is marked ↳). ``where``: what was searched
    (default: this server or chat)."""
    if result.world is None and not result.found:
        return _("Nothing remembered in {where} yet.", where=where or _(HERE))
    if not result.found:
        return _(NOTHING_FOUND)
    lines = []   # a message stored a moment ago, not yet routed, is found by its words and has no world yet
    if result.worlds:
        lines.append(_("From {worlds}:", worlds=", ".join(f"`{w.id}` “{w.topic}”" for w in result.worlds.values())))
    if result.beliefs:
        lines += [_("Beliefs:")] + [f"  {belief_line(b)}" for b in result.beliefs]
    if result.evidence:
        lines += [_("Messages:")] + [("    ↳ " if e.neighbour_of else "  ") + evidence_line(e)
                                     for e in result.evidence]
    return "\n".join(lines)


def searched(engine: MemoryEngine, text: str) -> str:
    """The search text, or one line saying it is too long (it would only slow the search)."""
    if len(text) > engine.max_query_chars:
        raise UsageError(_("that is {n} characters; a search takes at most {most}.", n=f"{len(text):,}",
                           most=f"{engine.max_query_chars:,}"))
    return text


SIM_ARG = Arg("sim", N_("a simulation id: read what its agents posted instead"), required=False, option=True)


async def chosen_viewer(ctx: CommandContext) -> tuple[Viewer, str]:
    """The viewer of this chat's memory (what the channel's audience can read), or of the
    simulation named by ``--sim`` when this channel may see it (engine.sim.records: another
    chat's, or one of an audience this channel does not read, is refused like one that does not
    exist); and what it is called."""
    sim_id = ctx.args.get("sim")
    if not sim_id:
        return ctx.viewer, _(HERE)
    if await ctx.app.sims.get(sim_id, ctx.viewer) is None:
        raise UsageError(not_here(sim_id))
    return Viewer(sim_scope(sim_id)), _("simulation {sim}", sim=sim_id)


def setup(app) -> None:
    cfg = app.config
    engine = app.memory
    app.remembers = True   # the app starts the engine (engine.services), its model warmed: /help does not wait
    queue = IngestQueue(engine, cfg.memory.ingest_queue_max, cfg.memory.ingest_batch_max,
                        cfg.memory.ingest_batch_wait_ms)
    reg = app.commands
    pending_forget: dict[tuple[str, str, str], Pending] = {}   # (scope, channel, author) ->

    async def start() -> None:
        queue.start()

    async def stop() -> None:
        await queue.close()   # before the engine closes (with the app's services): what it holds is stored

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
    app.finish_hooks.append(engine.flush)

    @reg.command("worlds", N_("The topic worlds remembered here (or of a simulation: --sim ID)"), [SIM_ARG],
                 group="memory")
    async def worlds(ctx: CommandContext) -> None:
        who, where = await chosen_viewer(ctx)
        found = await engine.worlds(who)
        waiting = await engine.unsorted(who)
        if not found:
            await ctx.reply.send(_("No worlds yet: {messages} still being sorted into worlds. Try /worlds again "
                                   "in a moment.", messages=plural(waiting, "{n} message", "{n} messages"))
                                 if waiting else _("No worlds yet: nothing remembered in {where}.", where=where))
            return
        lines = [_("{worlds}, most recently active first:", worlds=plural(len(found), "{n} world", "{n} worlds"))]
        for w in found[:30]:
            lines.append(_("`{id}` {topic} — {sizes} · active {ago}", id=w.id, topic=w.topic, sizes=world_sizes(w),
                           ago=ago(w.last_active)))
        if len(found) > 30:
            lines.append(_("… and {n} more. /world <name or id> shows one.", n=len(found) - 30))
        if waiting:
            lines.append(_("({messages} still being sorted into worlds.)",
                           messages=plural(waiting, "{n} message", "{n} messages")))
        await ctx.reply.send("\n".join(lines))

    @reg.command("world", N_("One world's beliefs, newest first (superseded ones marked ✗)"),
                 [Arg("name", N_("world id or topic words"), type="text"), SIM_ARG], group="memory")
    async def world(ctx: CommandContext) -> None:
        who, _where = await chosen_viewer(ctx)
        found = await engine.world(who, searched(engine, ctx.args["name"]))
        if found is None:
            raise UsageError(_("no world matches {name}. /worlds lists them.", name=repr(ctx.args["name"])))
        w, beliefs = found
        lines = [_("World `{id}` “{topic}” — {sizes} · born {born} · active {ago}", id=w.id, topic=w.topic,
                   sizes=world_sizes(w), born=f"{w.created_at:%Y-%m-%d}", ago=ago(w.last_active))]
        lines += [belief_line(b) for b in beliefs[:40]]
        if not beliefs:
            recent = await engine.recent_messages(who, w.id)
            lines += [_("No beliefs extracted yet. Its latest messages:")] + [f"  {evidence_line(e)}" for e in recent]
        if len(beliefs) > 40:
            lines.append(_("… and {n} older ones.", n=len(beliefs) - 40))
        await ctx.reply.send("\n".join(lines))

    @reg.command("recall", N_("What memory holds about something: its world, beliefs and messages"),
                 [Arg("query", N_("what to look for"), type="text"), SIM_ARG], group="memory")
    async def recall(ctx: CommandContext) -> None:
        who, where = await chosen_viewer(ctx)
        await ctx.reply.send(recall_text(await engine.recall(who, searched(engine, ctx.args["query"])), where))

    @reg.command("ask", N_("Answer a question from memory, citing what it rests on"),
                 [Arg("question", N_("your question"), type="text")], group="memory",
                 permission=costly(app) if cfg.llm.configured else EVERYONE)  # without an LLM it spends nothing
    async def ask(ctx: CommandContext) -> None:
        try:
            async with ctx.reply.typing():
                with person_waiting():
                    result = await engine.ask(ctx.viewer, searched(engine, ctx.args["question"]),
                                              ctx.message.channel)
        except LLMError as err:
            await ctx.reply.send(_("⚠ {error} Here is what memory holds:", error=public(str(err))) + "\n"
                                 + recall_text(await engine.recall(ctx.viewer, ctx.args["question"])))
            return
        if not result.recall.found:
            await ctx.reply.send(recall_text(result.recall))  # nothing to answer from: no LLM call was made
            return
        if result.answer is None:
            note = _("No language model is configured, so here is what memory holds instead of an answer:")
            await ctx.reply.send(note + "\n" + recall_text(result.recall))
            return
        await ctx.reply.send(f"{result.answer}\n\n" + _("Sources:") + f"\n{recall_text(result.recall)}")

    def forget_key(ctx: CommandContext) -> tuple[str, str, str]:
        return ctx.scope, ctx.message.channel, ctx.message.author_id

    def forget_privately(ctx: CommandContext) -> bool:
        """One message or one belief is forgotten in private: the prompt shows what it deletes."""
        what = ctx.args.get("what")
        if what == "confirm":
            pending = pending_forget.get(forget_key(ctx))
            return pending is not None and pending.kind in ("message", "belief")
        return what in ("message", "belief")

    @reg.command("forget", N_("Forget this channel's memory (admins), everything here (all, admins), your own "
                 "messages (me), one message (message <link or [M..]>: its author or admins) or one belief "
                 "(belief <B..>); then /forget confirm"), [
                     Arg("what", N_("all, me, message, belief or confirm"), type="choice",
                         choices=(N_("all"), N_("me"), N_("message"), N_("belief"), N_("confirm")), required=False),
                     Arg("target", N_("message: its link or [M..] id (or reply to it); belief: its [B..] id"),
                         required=False)], group="memory",
                 permission=ByAction("what", {
                     "me": EVERYONE, "confirm": EVERYONE,
                     "message": StarterOrAdmin(author_of_message, who=N_("the person who wrote it"),
                                               verb=N_("forget it")),
                     "belief": StarterOrAdmin(author_of_belief, who=N_("the author of every message it rests on"),
                                              verb=N_("forget it"))}, default=ADMIN),
                 private=forget_privately,
                 message_action=MessageAction(N_("Forget this message"), {"what": "message"}))
    async def forget(ctx: CommandContext) -> None:
        msg = ctx.message
        key = forget_key(ctx)
        what = ctx.args.get("what")
        if what == "confirm":
            request = pending_forget.pop(key, None)
            if request is None or time.monotonic() - request.asked > CONFIRM_WINDOW_S:
                raise UsageError(_("nothing to confirm: type /forget (or /forget all, /forget me, /forget message, "
                                   "/forget belief) first, then /forget confirm within {seconds} s.",
                                   seconds=f"{CONFIRM_WINDOW_S:.0f}"))
            if request.kind == "me":
                counts = await engine.forget_author(ctx.scope, msg.author_id)
                where = _("your messages here")
            elif request.kind == "message":
                counts = await engine.forget_messages(ctx.scope, [request.target])
                where = _("that message")
            elif request.kind == "belief":
                counts = await engine.forget_belief(ctx.scope, request.target)
                where = _("that belief")
            else:
                counts = await engine.forget(ctx.scope, request.target)
                where = _("this channel") if request.target else _(HERE)
            notes = [] if request.beyond is None else [
                note for hook in app.on_forget if (note := await hook(request.beyond))]
            await ctx.reply.send("\n".join([
                _("Forgot {where}: {messages}, {beliefs}, {worlds} removed; topic names rest only on what is left.",
                  where=where, messages=plural(counts["messages"], "{n} message", "{n} messages"),
                  beliefs=plural(counts["beliefs"], "{n} belief", "{n} beliefs"),
                  worlds=plural(counts["worlds"], "{n} world", "{n} worlds")), *notes]))
            return
        if what == "me" and not msg.author_id:
            raise UsageError(_("this message has no author the bot can tell apart: nothing of yours to forget."))
        if what == "message":
            found = await named_message(ctx)
            if found is None:
                raise UsageError(
                    _("no message here matches that: give its link (Copy Message Link), its [M..] id as /recall "
                      "cites it, or send /forget message as a reply to it.") if not ctx.args.get("target") and
                    not msg.reply_to else
                    _("no remembered message here matches {target}.", target=ctx.args.get("target") or _("that")))
            pending_forget[key] = Pending("message", found.id, time.monotonic(),
                                          Forgotten(ctx.viewer, found.channel, found.author_id, found.text))
            text = found.text if len(found.text) <= 200 else found.text[:199] + "…"
            also = _(" (and, if it asked a report agent, that question and its answer)") if app.on_forget else ""
            await ctx.reply.send(_("This deletes for good [M{id}] ({author}, {when}: “{text}”) and the beliefs "
                                   "resting only on it{also}. Type /forget confirm within {seconds} s to go ahead.",
                                   id=found.id, author=found.author, when=f"{found.ts:%Y-%m-%d %H:%M}", text=text,
                                   also=also, seconds=f"{CONFIRM_WINDOW_S:.0f}"))
            return
        if what == "belief":
            named = await named_belief(ctx)
            if named is None:
                target = ctx.args.get("target")
                raise UsageError(_("no belief here matches {target}.", target=target) if target else
                                 _("name the belief by its [B..] id, as /world, /recall and /me show it: "
                                   "/forget belief B12."))
            belief = named[0]
            pending_forget[key] = Pending("belief", belief.id, time.monotonic())
            await ctx.reply.send(_("This deletes for good [B{id}] {subject} — {predicate} — {object} (the messages "
                                   "it rests on stay). Type /forget confirm within {seconds} s to go ahead.",
                                   id=belief.id, subject=belief.subject, predicate=belief.predicate,
                                   object=belief.object, seconds=f"{CONFIRM_WINDOW_S:.0f}"))
            return
        kind = what if what in ("all", "me") else "channel"
        pending_forget[key] = Pending(kind, None if kind == "all" else msg.channel, time.monotonic(),
                                      Forgotten(ctx.viewer, channel=msg.channel if kind == "channel" else None,
                                                author_id=msg.author_id if kind == "me" else None))
        where = _({"all": N_("everything remembered in this server or chat"),
                   "me": N_("every message of yours remembered in this server or chat (and the beliefs resting "
                            "only on them)")}.get(what or "", N_("this channel's memory")))
        if app.on_forget:   # report chat goes too (bot.features.simulation.reportchat); simulations stay
            where += _({"all": N_(", and the questions asked to report agents here (simulations stay, with their "
                                  "documents, runs and reports: /sims lists them)"),
                        "me": N_(", and your questions to report agents here")}.get(
                what or "", N_(" and the questions asked to report agents in it")))
        await ctx.reply.send(_("This deletes for good {what}. Type /forget confirm within {seconds} s to go ahead.",
                               what=where, seconds=f"{CONFIRM_WINDOW_S:.0f}"))

    @reg.command("memory", N_("Turn remembering this channel's messages on or off (admins), or your own "
                 "messages anywhere here (me)"),
                 [Arg("state", N_("on or off"), type="choice", choices=(N_("on"), N_("off"))),
                  Arg("who", N_("me: only your own messages, in every channel of this server or chat"), type="choice",
                      choices=(N_("me"),), required=False)],
                 permission=ByAction("who", {"me": EVERYONE}, default=ADMIN), group="memory",
                 private=lambda ctx: ctx.args.get("who") == "me")
    async def memory(ctx: CommandContext) -> None:
        state, msg = ctx.args["state"], ctx.message
        if ctx.args.get("who") == "me":
            if not msg.author_id:
                raise UsageError(_("this message has no author the bot can tell apart."))
            if state == "off":
                await engine.opt_out(ctx.scope, msg.author_id, msg.author_name)
                await ctx.reply.send(_("I no longer store your messages in this server or chat, from any channel "
                                       "(history imported later included), until you send /memory on me. What I "
                                       "already hold of yours stays: /me shows it, /forget me deletes it."))
            elif await engine.opt_in(ctx.scope, msg.author_id):
                await ctx.reply.send(_("I store your messages in this server or chat again."))
            else:
                await ctx.reply.send(_("Your messages here are already remembered (/memory off me stops that)."))
            return
        await app.set_setting(ctx.scope, ctx.message.channel, MEMORY_SETTING, state)
        await ctx.reply.send(_("I remember this channel's messages again.") if state == "on" else
                             _("I no longer remember this channel's messages (what I already hold stays; "
                               "/forget clears it)."))
