"""/digest and /settings, and the scheduler that posts digests and merges worlds daily."""
from __future__ import annotations

from bot.app import MEMORY_SETTING
from bot.commands.registry import Arg, CommandContext, UsageError
from bot.permissions import ADMIN, ByAction
from bot.scheduler import Scheduler

SETTINGS = {
    "memory": "on|off — remember plain messages of this channel (same as /memory)",
    "digest_time": "HH:MM — time of this channel's daily digest (turns the digest on)",
    "timezone": "IANA zone, e.g. Europe/Berlin — time zone of this channel's digest",
}


def _when(sub, scheduler: Scheduler) -> str:
    nxt = scheduler.next_run(sub.scope, sub.channel)
    tail = f"; next {nxt.strftime('%Y-%m-%d %H:%M %Z')}" if nxt else ""
    return f"daily at {sub.time} {sub.timezone}{tail}"


def setup(app) -> None:
    scheduler = Scheduler(app)
    app.services["scheduler"] = scheduler
    reg = app.commands

    async def start() -> None:
        await scheduler.start()

    async def stop() -> None:
        scheduler.stop()

    app.on_start.append(start)
    app.on_stop.append(stop)
    app.on_ready.append(scheduler.catch_up)

    @reg.command("digest", "Daily digest of this channel: on [HH:MM] [zone], off, now, or status", [
        Arg("action", "on, off, now or status", type="choice", choices=("on", "off", "now", "status"),
            required=False),
        Arg("time", "HH:MM for on (default from config)", required=False),
        Arg("timezone", "IANA time zone for on, e.g. Europe/Berlin", required=False),
    ], permission=ByAction("action", {"on": ADMIN, "off": ADMIN}), group="digest")
    async def digest(ctx: CommandContext) -> None:
        action = ctx.args.get("action") or "status"
        scope, channel = ctx.scope, ctx.message.channel
        if action == "on":
            try:
                sub = await scheduler.subscribe(scope, channel, ctx.args.get("time"), ctx.args.get("timezone"))
            except ValueError as err:
                raise UsageError(str(err)) from None
            await ctx.reply.send(f"Digest on: {_when(sub, scheduler)}.")
        elif action == "off":
            done = await scheduler.unsubscribe(scope, channel)
            await ctx.reply.send("Digest off." if done else "This channel had no digest.")
        elif action == "now":
            if not await scheduler.post_digest(scope, channel):
                await ctx.reply.error("could not post the digest here.")
        else:
            sub = await scheduler.subscription(scope, channel)
            await ctx.reply.send(f"Digest {_when(sub, scheduler)}." if sub else
                                 "No digest here. /digest on [HH:MM] [time zone] starts one.")

    @reg.command("settings", "Show or change this chat's settings (memory, digest time, time zone)", [
        Arg("key", "memory, digest_time or timezone", type="choice", choices=tuple(SETTINGS), required=False),
        Arg("value", "the new value", required=False),
    ], permission=ADMIN, group="digest")
    async def settings(ctx: CommandContext) -> None:
        key, value = ctx.args.get("key"), (ctx.args.get("value") or "").strip()
        scope, channel = ctx.scope, ctx.message.channel
        if key and value:
            if key == "memory":
                if value.lower() not in ("on", "off"):
                    raise UsageError("memory is on or off")
                await ctx.app.set_setting(scope, channel, MEMORY_SETTING, value.lower())
            else:
                try:
                    sub = await scheduler.subscribe(
                        scope, channel, *((value, None) if key == "digest_time" else (None, value)))
                except ValueError as err:
                    raise UsageError(str(err)) from None
                value = _when(sub, scheduler)
            await ctx.reply.send(f"{key} set: {value}.")
            return
        if key:
            raise UsageError(f"give a value: /settings {key} <{SETTINGS[key].split(' — ')[0]}>")
        memory = await ctx.app.get_setting(scope, channel, MEMORY_SETTING, "on")
        sub = await scheduler.subscription(scope, channel)
        lines = [f"memory: {memory}", f"digest: {_when(sub, scheduler) if sub else 'off'}",
                 "Change one with /settings <key> <value>:"]
        lines += [f"  {k}: {v}" for k, v in SETTINGS.items()]
        await ctx.reply.send("\n".join(lines))

