"""/help, /jobs, /cancel, /resume, /confirm: the commands every other feature leans on.

Stopping, resuming and confirming belong to the person who started the job (or asked for
the action) and to administrators (bot.permissions)."""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext
from bot.confirm import Confirmations
from bot.permissions import StarterOrAdmin, job_starter_or_admin
from engine.jobs import Job


def describe_job(job: Job) -> str:
    pct = f" {job.progress * 100:.0f}%" if job.progress is not None and not job.finished else ""
    line = f"`{job.id}` {job.title} — {job.state}{pct}"
    if job.error:
        line += f": {job.error}"
    elif job.message:
        line += f" · {job.message}"
    return line


def setup(app) -> None:
    reg = app.commands
    app.services["confirmations"] = confirmations = Confirmations()

    @reg.command("help", "List the commands, or explain one", [
        Arg("command", "a command name", required=False)])
    async def help_(ctx: CommandContext) -> None:
        name = (ctx.args.get("command") or "").lstrip("/")
        if name:
            cmd = reg.get(name)
            if cmd is None:
                await ctx.reply.error(f"no command /{name}. Type /help for the list.")
                return
            lines = [cmd.usage(), cmd.description]
            lines += [f"  {a.name}: {a.description}" for a in cmd.args]
            if who := cmd.permission.describe():
                lines.append(f"  (who may use it: {who})")
            await ctx.reply.send("\n".join(lines))
            return
        groups: dict[str, list[str]] = {}
        for cmd in reg.commands.values():
            groups.setdefault(cmd.group, []).append(f"{cmd.usage()} — {cmd.description}")
        text = "Commands:\n" + "\n".join(
            f"[{g}]\n" + "\n".join(f"  {line}" for line in lines) for g, lines in groups.items())
        await ctx.reply.send(text + "\nPlain messages are remembered. /help <command> for details.")

    @reg.command("jobs", "Background jobs of this server or chat", group="jobs")
    async def jobs(ctx: CommandContext) -> None:
        found = await ctx.app.jobs.list(scope=ctx.scope, limit=15)
        await ctx.reply.send("\n".join(map(describe_job, found)) if found else "No jobs yet.")

    @reg.command("cancel", "Cancel a running job", [Arg("job", "job id")],
                 permission=job_starter_or_admin("stop it"), group="jobs")
    async def cancel(ctx: CommandContext) -> None:
        job = await ctx.app.jobs.get(ctx.args["job"])
        if job is None or job.scope != ctx.scope:
            await ctx.reply.error(f"no job {ctx.args['job']} here. /jobs lists them.")
        elif not await ctx.app.jobs.cancel(job.id):
            await ctx.reply.error(f"job {job.id} is not running (it is {job.state}).")
        else:
            await ctx.reply.send(f"Cancelled job {job.id}.")

    @reg.command("resume", "Resume an interrupted or failed job from its last checkpoint",
                 [Arg("job", "job id")], permission=job_starter_or_admin("resume it"), group="jobs")
    async def resume(ctx: CommandContext) -> None:
        job = await ctx.app.jobs.get(ctx.args["job"])
        if job is None or job.scope != ctx.scope:
            await ctx.reply.error(f"no job {ctx.args['job']} here. /jobs lists them.")
            return
        await ctx.app.jobs.resume(job.id)
        await ctx.reply.send(f"Resuming {job.title} (`{job.id}`).")

    async def asked_by(ctx: CommandContext) -> str | None:
        return confirmations.author_of(ctx.scope, ctx.args["code"].strip())

    @reg.command("confirm", "Go ahead with an action that asked for confirmation", [
        Arg("code", "the code the bot gave")], group="jobs",
        permission=StarterOrAdmin(asked_by, who="the person who asked for it", verb="confirm it"))
    async def confirm(ctx: CommandContext) -> None:
        action = confirmations.take(ctx.scope, ctx.args["code"].strip())
        if action is None:
            await ctx.reply.error(f"nothing waits for code {ctx.args['code']} here (codes expire "
                                  f"after {confirmations.ttl_s / 60:.0f} minutes).")
            return
        await action()
