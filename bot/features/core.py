"""/help, /jobs, /cancel, /resume, /confirm: the commands every other feature leans on.

Stopping and resuming belong to the person who started the job and to administrators; what waits
for /confirm spends above ``[simulation] confirm_above_usd``, so only an administrator of the
server or group, or one of the bot's owners, confirms it, never someone who administers only their
own direct message (bot.permissions). A channel sees only the jobs its audience may read
(``App.sees_job``: one started in a private channel is listed and acted on only where that
channel's audience reads); any other is answered like a job that does not exist."""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext
from bot.permissions import ServerAdmin, job_starter_or_admin
from bot.public import job_error
from engine.i18n import N_, _, describe
from engine.jobs import Job, state_name

# /help's groups, as each reads in its heading
GROUPS = {"general": N_("general"), "memory": N_("memory"), "jobs": N_("jobs"), "simulation": N_("simulation"),
          "digest": N_("digest and settings")}


def describe_job(job: Job) -> str:
    pct = f" {job.progress * 100:.0f}%" if job.progress is not None and not job.finished else ""
    line = f"`{job.id}` {job.title} — {state_name(job.state)}{pct}"
    if job.error:
        line += f": {job_error(job)}"
    elif job.message:
        line += f" · {job.message}"
    return line


async def visible_job(ctx: CommandContext) -> Job | None:
    """The job the argument ``job`` names, if this channel may see it (``App.sees_job``)."""
    job = await ctx.app.jobs.get(ctx.args["job"])
    return job if job is not None and await ctx.app.sees_job(ctx.viewer, job) else None


def setup(app) -> None:
    reg = app.commands
    confirmations = app.confirmations

    @reg.command("help", N_("List the commands, or explain one"), [
        Arg("command", N_("a command name"), required=False)])
    async def help_(ctx: CommandContext) -> None:
        name = (ctx.args.get("command") or "").lstrip("/")
        if name:
            cmd = reg.get(name)
            if cmd is None:
                await ctx.reply.error(_("no command /{name}. Type /help for the list.", name=name))
                return
            lines = [cmd.usage(), describe(cmd.description)]
            lines += [f"  {a.name}: {describe(a.description)}" for a in cmd.args]
            if who := cmd.permission.describe():
                lines.append(_("  (who may use it: {who})", who=who))
            await ctx.reply.send("\n".join(lines))
            return
        groups: dict[str, list[str]] = {}
        for cmd in reg.commands.values():
            groups.setdefault(cmd.group, []).append(f"{cmd.usage()} — {describe(cmd.description)}")
        text = _("Commands:") + "\n" + "\n".join(
            f"[{_(GROUPS.get(g, g))}]\n" + "\n".join(f"  {line}" for line in lines) for g, lines in groups.items())
        await ctx.reply.send(text + "\n" + _("Plain messages are remembered. /help <command> for details."))

    @reg.command("jobs", N_("Background jobs of this server or chat"), group="jobs")
    async def jobs(ctx: CommandContext) -> None:
        # the latest 15 this channel may see, among the scope's latest 100
        found = [j for j in await ctx.app.jobs.list(scope=ctx.scope, limit=100)
                 if await ctx.app.sees_job(ctx.viewer, j)]
        await ctx.reply.send("\n".join(map(describe_job, found[:15])) if found else _("No jobs yet."))

    @reg.command("cancel", N_("Cancel a running job"), [Arg("job", N_("job id"))],
                 permission=job_starter_or_admin(N_("stop it")), group="jobs")
    async def cancel(ctx: CommandContext) -> None:
        job = await visible_job(ctx)
        if job is None:
            await ctx.reply.error(_("no job {job} here. /jobs lists them.", job=ctx.args["job"]))
        elif not await ctx.app.jobs.cancel(job.id):
            await ctx.reply.error(_("job {job} is not running (it is {state}).", job=job.id,
                                    state=state_name(job.state)))
        else:
            await ctx.reply.send(_("Cancelled job {job}.", job=job.id))

    @reg.command("resume", N_("Resume an interrupted or failed job from its last checkpoint"),
                 [Arg("job", N_("job id"))], permission=job_starter_or_admin(N_("resume it")), group="jobs")
    async def resume(ctx: CommandContext) -> None:
        job = await visible_job(ctx)
        if job is None:
            await ctx.reply.error(_("no job {job} here. /jobs lists them.", job=ctx.args["job"]))
            return
        await ctx.app.jobs.resume(job.id)
        await ctx.reply.send(_("Resuming {title} (`{job}`).", title=job.title, job=job.id))

    @reg.command("confirm", N_("Go ahead with an action that asked for confirmation"), [
        Arg("code", N_("the code the bot gave"))], group="jobs", permission=ServerAdmin(N_("confirm it")))
    async def confirm(ctx: CommandContext) -> None:
        action = confirmations.take(ctx.scope, ctx.args["code"].strip())
        if action is None:
            await ctx.reply.error(_("nothing waits for code {code} here (codes expire after {minutes} minutes).",
                                    code=ctx.args["code"], minutes=f"{confirmations.ttl_s / 60:.0f}"))
            return
        await action()
