"""/digest and /settings, and the scheduler that posts digests and merges worlds daily.

``/settings language <code>`` chooses the language the bot writes in to a channel (administrators;
``auto`` gives the choice back to the platform's locale and ``[bot] language``: App.language_of).
"""
from __future__ import annotations

from bot.app import LANGUAGE_SETTING, MEMORY_SETTING
from bot.commands.registry import Arg, CommandContext, UsageError, shown
from bot.permissions import ADMIN, ByAction
from bot.scheduler import Scheduler
from engine import language
from engine.i18n import LANGUAGES, N_, _, normalize, using

# key -> (what a value looks like, what it does): msgids
SETTINGS = {
    N_("memory"): (N_("on|off"), N_("remember plain messages of this channel (same as /memory)")),
    N_("digest_time"): (N_("HH:MM"), N_("time of this channel's daily digest (turns the digest on)")),
    N_("timezone"): (N_("IANA zone, e.g. Europe/Berlin"), N_("time zone of this channel's digest")),
    N_("language"): (N_("{languages} or auto"), N_("the language I write in here (auto: the platform's, else the "
                                               "bot's default)")),
}
AUTO = "auto"


def _value_hint(key: str) -> str:
    return _(SETTINGS[key][0], languages=", ".join(LANGUAGES))


def _when(sub, scheduler: Scheduler) -> str:
    nxt = scheduler.next_run(sub.scope, sub.channel)
    if nxt:
        return _("daily at {time} {zone}; next {next}", time=sub.time, zone=sub.timezone,
                 next=nxt.strftime("%Y-%m-%d %H:%M %Z"))
    return _("daily at {time} {zone}", time=sub.time, zone=sub.timezone)


def setup(app) -> None:
    app.scheduler = scheduler = Scheduler(app)
    reg = app.commands

    async def start() -> None:
        await scheduler.start()

    async def stop() -> None:
        scheduler.stop()

    app.on_start.append(start)
    app.on_stop.append(stop)
    app.on_ready.append(scheduler.catch_up)

    @reg.command("digest", N_("Daily digest of this channel: on [HH:MM] [zone], off, now, or status"), [
        Arg("action", N_("on, off, now or status"), type="choice",
            choices=(N_("on"), N_("off"), N_("now"), N_("status")), required=False),
        Arg("time", N_("HH:MM for on (default from config)"), required=False),
        Arg("timezone", N_("IANA time zone for on, e.g. Europe/Berlin"), required=False),
    ], permission=ByAction("action", {"on": ADMIN, "off": ADMIN}), group="digest")
    async def digest(ctx: CommandContext) -> None:
        action = ctx.args.get("action") or "status"
        scope, channel = ctx.scope, ctx.message.channel
        if action == "on":
            try:
                sub = await scheduler.subscribe(scope, channel, ctx.args.get("time"), ctx.args.get("timezone"))
            except ValueError as err:
                raise UsageError(str(err)) from None
            await ctx.reply.send(_("Digest on: {when}.", when=_when(sub, scheduler)))
        elif action == "off":
            done = await scheduler.unsubscribe(scope, channel)
            await ctx.reply.send(_("Digest off.") if done else _("This channel had no digest."))
        elif action == "now":
            if not await scheduler.post_digest(scope, channel):
                await ctx.reply.error(_("could not post the digest here."))
        else:
            current = await scheduler.subscription(scope, channel)
            await ctx.reply.send(_("Digest {when}.", when=_when(current, scheduler)) if current else
                                 _("No digest here. /digest on [HH:MM] [time zone] starts one."))

    @reg.command("settings", N_("Show or change this chat's settings (memory, digest time, time zone, language)"), [
        Arg("key", N_("memory, digest_time, timezone or language"), type="choice", choices=tuple(SETTINGS),
            required=False),
        Arg("value", N_("the new value"), required=False),
    ], permission=ADMIN, group="digest")
    async def settings(ctx: CommandContext) -> None:
        key, value = ctx.args.get("key"), (ctx.args.get("value") or "").strip()
        scope, channel = ctx.scope, ctx.message.channel
        if key and value:
            if key == "memory":
                if value.lower() not in ("on", "off"):
                    raise UsageError(_("memory is on or off"))
                await ctx.app.set_setting(scope, channel, MEMORY_SETTING, value.lower())
            elif key == "language":
                chosen = AUTO if value.lower() == AUTO else normalize(value)
                if chosen is None:
                    raise UsageError(_("I do not speak {value}: {languages}, or auto (the platform's language).",
                                       value=shown(value), languages=", ".join(LANGUAGES)))
                await ctx.app.set_setting(scope, channel, LANGUAGE_SETTING, chosen)
                with using(await ctx.app.language_of(scope, channel, ctx.message.locale)):   # said in the new one
                    await ctx.reply.send(_("language set: {value}.", value=chosen if chosen == AUTO else
                                           f"{chosen} ({language.name(chosen, chosen)})"))
                return
            else:
                try:
                    sub = await scheduler.subscribe(
                        scope, channel, *((value, None) if key == "digest_time" else (None, value)))
                except ValueError as err:
                    raise UsageError(str(err)) from None
                value = _when(sub, scheduler)
            await ctx.reply.send(_("{key} set: {value}.", key=key, value=value))
            return
        if key:
            raise UsageError(_("give a value: /settings {key} <{hint}>", key=key, hint=_value_hint(key)))
        memory = await ctx.app.get_setting(scope, channel, MEMORY_SETTING, "on")
        chosen = await ctx.app.get_setting(scope, channel, LANGUAGE_SETTING, AUTO)
        speaking = await ctx.app.language_of(scope, channel, ctx.message.locale)
        current = await scheduler.subscription(scope, channel)
        lines = [f"memory: {_(memory or 'on')}"]
        if ctx.app.remembers:
            away = await ctx.app.memory.opted_out(scope)
            mine = any(o.author_id == ctx.message.author_id for o in away)
            lines.append(_("members who turned memory off for themselves here (/memory off me): {n}", n=len(away))
                         + (_(" (you among them)") if mine else ""))
        lines += ["digest: " + (_when(current, scheduler) if current else _("off")),
                  f"language: {chosen} → {language.name(speaking, speaking)}",
                  _("Change one with /settings <key> <value>:")]
        lines += [f"  {k}: {_value_hint(k)} — {_(does)}" for k, (_hint, does) in SETTINGS.items()]
        await ctx.reply.send("\n".join(lines))

