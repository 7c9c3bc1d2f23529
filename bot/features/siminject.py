"""``/sim inject <sim> <text> [--round N] [--platform twitter|reddit|both] [--as NAME]``, and the
injected events of ``/sim status``.

A thin handler over ``engine.sim.inject``: the simulation's starter or an administrator (the
``/sim`` command's rule for this action) schedules an event; bad input is one line.
"""
from __future__ import annotations

from pathlib import Path

from bot.commands.registry import CommandContext, UsageError
from engine.offload import run_cpu
from engine.sim.inject import InjectRefused, inject, injection_status

OPTIONS = ("text", "round", "platform", "as")  # the arguments of /sim that only inject takes


async def sim_inject(app, ctx: CommandContext, row) -> None:
    if "sim_runs" not in app.services:
        raise UsageError("simulation runs are not enabled in this bot")
    try:
        done = await inject(app.services["sim_runs"], row["id"], Path(row["folder"]), ctx.args.get("text") or "",
                            round_no=ctx.args.get("round"), platform=ctx.args.get("platform") or "both",
                            source=ctx.args.get("as"), asked_by=ctx.message.author_name or ctx.message.author_id)
    except InjectRefused as err:
        raise UsageError(str(err)) from None
    e = done.injection
    where = " and ".join(e.platforms)
    text = (f"📰 Scheduled for the start of round {e.round} on {where}: {e.source} posts “{e.text}” "
            f"(event `{e.id}`). /sim status {row['id']} shows when it goes out.")
    if done.late_on:
        text += (f"\nRound {e.round} had already begun on {' and '.join(done.late_on)}: "
                 f"it goes out there at the start of round {e.round + 1}.")
    await ctx.reply.send(text)


async def status_lines(row) -> list[str]:
    """The simulation's injected events, scheduled or published, for ``/sim status``."""
    states = await run_cpu(injection_status, Path(row["folder"]))
    return ["injected events:"] + [f"• {s.describe()}" for s in states] if states else []
