"""What a member may ask of memory for themselves: /me, /export me and /catchup.

All three answer the asker alone (``private=True``: Discord's ephemeral follow-ups, the asker's
private chat on Telegram with a note in the group, the console), so nothing about one member, and
no catch-up nobody else asked for, is posted in a channel. /me shows only what the asking
channel's audience may read (engine.memory.members.about); /export me sends every message of
theirs in this server or chat and the beliefs resting on them, as JSON and Markdown files;
/catchup summarises the channel since their last message there, per topic world, in one LLM call
counted against the server or chat like /ask (engine.memory.catchup), or without an LLM shows
each topic's most central messages.
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.permissions import EVERYONE, costly
from engine.i18n import N_, _
from engine.llm.client import person_waiting
from engine.memory import MemoryEngine
from engine.memory.catchup import Catchup, Item, estimate, parse_since
from engine.memory.members import About, write_export
from engine.words import plural

DEFAULT_CATCHUP = timedelta(days=1)   # for a member who never wrote in the channel


def when(ts: datetime | None) -> str:
    return f"{ts:%Y-%m-%d %H:%M}" if ts is not None else "?"


def about_text(name: str, about: About) -> str:
    """/me: what memory holds about the asker here."""
    lines = [_("What I hold about you ({name}) in this server or chat:", name=name)]
    if about.opt_out is not None:
        lines.append(_("• Your messages are not stored here since {date} (/memory on me stores them again).",
                       date=f"{about.opt_out.since:%Y-%m-%d}"))
    else:
        lines.append(_("• Your messages are stored here (/memory off me stops that)."))
    if about.messages:
        lines.append(_("• {messages} of yours, {first} to {last} UTC.",
                       messages=plural(about.messages, "{n} message", "{n} messages"), first=when(about.first),
                       last=when(about.last)))
    else:
        lines.append(_("• No message of yours that this channel may show."))
    if about.elsewhere:
        lines.append(plural(about.elsewhere, "• {n} more message in channels whose memory is not shown here (ask /me "
                            "there).", "• {n} more messages in channels whose memory is not shown here (ask /me "
                            "there)."))
    if about.worlds:
        lines.append(_("• Where you talk most: {worlds}.", worlds=", ".join(
            f"“{w.topic or w.id}” ({n})" + (_(" (archived)") if w.archived_at else "") for w, n in about.worlds)))
    for title, shown, total in ((_("Beliefs resting on your messages"), about.resting, about.resting_total),
                                (_("Beliefs that name you"), about.naming, about.naming_total)):
        if total:
            lines.append(f"• {title} ({total}):")
            lines += [f"    [B{b.id}] {b.subject} — {b.predicate} — {b.object} ({b.confidence:.2f})" for b in shown]
            if total > len(shown):
                lines.append(_("    … and {n} more (/export me lists them all).", n=total - len(shown)))
    lines.append(_("/export me sends you all of it; /forget message <link> or /forget belief <B..> deletes one "
                   "thing; /forget me deletes all your messages here."))
    return "\n".join(lines)


def _item(item: Item) -> str:
    return (f"    • {item.text} — {', '.join(item.people)} "
            + "".join(f"[M{e.id}]" for e in item.sources))


def catchup_text(result: Catchup, since_note: str, llm: bool) -> str:
    """/catchup: per topic world, what was said (the LLM's points, decisions and open questions, or
    the most central messages)."""
    if not result.messages:
        return _("Nothing was said in this channel {since}.", since=since_note)
    lines = [_("{messages} in this channel {since}, in {topics}:",
               messages=plural(result.messages, "{n} message", "{n} messages"), since=since_note,
               topics=plural(len(result.worlds) + result.other_worlds, "{n} topic", "{n} topics"))]
    for w in result.worlds:
        people = ", ".join(w.people[:5]) + (", …" if len(w.people) > 5 else "")
        lines.append(f"\n“{w.world.topic or w.world.id}” — " + plural(w.messages, "{n} message", "{n} messages")
                     + f" ({people})")
        if result.summarised:
            for title, items in ((_("Main points"), w.points), (_("Decisions"), w.decisions),
                                 (_("Open questions"), w.questions)):
                if items:
                    lines.append(f"  {title}:")
                    lines += [_item(i) for i in items]
            if not (w.points or w.decisions or w.questions):
                lines += [f"  [M{e.id}] {e.author}, {e.ts:%H:%M}: {e.text[:200]}" for e in w.central]
        else:
            lines += [f"  [M{e.id}] {e.author}, {e.ts:%H:%M}: {e.text if len(e.text) <= 200 else e.text[:199] + '…'}"
                      for e in w.central]
    if result.other_worlds:
        lines.append("\n" + plural(result.other_worlds, "… and {n} quieter topic.", "… and {n} quieter topics."))
    if result.error:
        lines.append("\n" + _("⚠ {error} These are the most central messages of each topic instead.",
                              error=result.error))
    elif not llm:
        lines.append("\n" + _("No language model is configured: these are the most central messages of each topic."))
    return "\n".join(lines)


def setup(app) -> None:
    reg = app.commands
    calls, tokens = estimate(app.config.memory)

    def engine() -> MemoryEngine:
        return app.memory

    @reg.command("me", N_("What memory holds about you here (only you see it)"), group="memory", private=True)
    async def me(ctx: CommandContext) -> None:
        msg = ctx.message
        if not msg.author_id:
            raise UsageError(_("this message has no author the bot can tell apart."))
        await ctx.reply.send(about_text(msg.author_name, await engine().about(ctx.viewer, msg.author_id,
                                                                              msg.author_name)))

    @reg.command("export", N_("Your messages here and the beliefs resting on them, as JSON and Markdown files "
                 "(only you get them)"), [Arg("what", N_("me"), type="choice", choices=(N_("me"),))], group="memory",
                 private=True)
    async def export(ctx: CommandContext) -> None:
        msg = ctx.message
        if not msg.author_id:
            raise UsageError(_("this message has no author the bot can tell apart."))
        data = await engine().export_member(ctx.scope, author_id=msg.author_id)
        if not data["messages"]:
            await ctx.reply.send(_("Memory holds no message of yours in this server or chat."))
            return
        data["author"] = msg.author_name
        folder = app.config.data_dir / "outgoing" / msg.platform / f"export-{time.time_ns()}"
        paths = write_export(data, folder, "my-memory")
        try:
            await ctx.reply.upload(paths[0], _("{messages} of yours and {beliefs} resting on them (JSON).",
                                               messages=plural(len(data["messages"]), "{n} message", "{n} messages"),
                                               beliefs=plural(len(data["beliefs"]), "{n} belief", "{n} beliefs")))
            await ctx.reply.upload(paths[1], _("The same as Markdown."))
        finally:
            if ctx.reply.copies_uploads:
                await app.files.discard(paths)

    @reg.command("catchup", N_("What was said in this channel since your last message here (or since 2h, "
                 "yesterday), per topic (only you see it)"), [
                     Arg("since", lambda: _("2h, 30m, 3d, today, yesterday or a date (default: your last message "
                                            "here); with an LLM {calls}, at most {tokens} tokens",
                                            calls=plural(calls, "{n} call", "{n} calls"), tokens=f"{tokens:,}"),
                         required=False)],
                 group="memory", private=True,
                 permission=costly(app) if app.config.llm.configured else EVERYONE)  # without an LLM it spends nothing
    async def catchup(ctx: CommandContext) -> None:
        msg, memory = ctx.message, engine()
        now, after = datetime.now(timezone.utc), None
        if ctx.args.get("since"):
            try:
                since = parse_since(ctx.args["since"], now, app.config.memory.timezone)
            except ValueError as err:
                raise UsageError(str(err)) from None
            note = _("since {when} UTC", when=when(since))
        elif (last := await memory.last_said(ctx.scope, msg.channel, msg.author_id)) is not None:
            after, since = last
            note = _("since your last message here ({when} UTC)", when=when(since))
        else:
            since = now - DEFAULT_CATCHUP
            note = _("in the last day (you have not written here)")
        async with ctx.reply.typing():
            with person_waiting():
                result = await memory.catchup(ctx.viewer, msg.channel, since, after)
        await ctx.reply.send(catchup_text(result, note, memory.llm_for(ctx.scope) is not None))
