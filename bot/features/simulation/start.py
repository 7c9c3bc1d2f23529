"""/simulate and /sims: start a simulation of how the events in documents unfold, list them.

``/simulate`` checks the attached documents, estimates the cost and starts the simulation's
pipeline job through the Simulations service (after ``/confirm`` when the estimate is above
``[simulation] confirm_above_usd`` / ``confirm_above_tokens``); the job's progress message
follows in the channel. Administrators start simulations.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import clip, simulations
from bot.permissions import ADMIN
from engine.documents import read_documents
from engine.jobs import JobError
from engine.sim import sizing
from engine.sim.estimate import estimate
from engine.words import plural


def needs_confirmation(config, cost) -> bool:
    limit_usd, limit_tokens = config.simulation.confirm_above_usd, config.simulation.confirm_above_tokens
    if cost.usd is not None:
        return limit_usd > 0 and cost.usd > limit_usd
    return limit_tokens > 0 and cost.tokens > limit_tokens


def setup(app) -> None:
    reg = app.commands
    sims = simulations(app)

    @reg.command("simulate", "Simulate how the events in documents unfold on social media", [
        Arg("files", "documents (.txt .md .pdf .docx .html)", type="attachment", multiple=True),
        Arg("requirement", "what the simulation should predict", type="text"),
        Arg("agents", "number of agents", type="int", required=False, option=True),
        Arg("rounds", "number of rounds (simulated hours by default)", type="int", required=False, option=True),
    ], permission=ADMIN, group="simulation")
    async def simulate(ctx: CommandContext) -> None:
        if sims.llm is None:
            raise UsageError("simulations need an LLM: set [llm] base_url in config.toml")
        try:
            sizing.check(ctx.args.get("agents"), ctx.args.get("rounds"))
        except JobError as err:
            raise UsageError(str(err)) from None
        paths = []
        for att in ctx.args["files"]:
            if att.path is None:
                raise UsageError(f"{att.filename}: the file could not be downloaded")
            paths.append(Path(att.path))
        if len(paths) > app.config.documents.max_files:
            raise UsageError(f"too many documents ({len(paths)}; the limit is {app.config.documents.max_files})")
        docs = await read_documents(paths, app.config.documents)
        sizes = sizing.resolve(app.config.simulation, ctx.args.get("agents"), ctx.args.get("rounds"))
        agents, rounds = sizes.agents, sizes.rounds
        cost = await asyncio.to_thread(estimate, app.config, docs, ctx.args["requirement"], sizes)
        clamps = "".join(f"\nNote: {note}." for note in sizes.notes)

        async def start() -> None:
            sim_id, spec = await sims.create(paths, ctx.args["requirement"], ctx.scope, ctx.message.channel,
                                             agents=ctx.args.get("agents"), rounds=ctx.args.get("rounds"))
            job = await sims.submit(sim_id, ctx.scope, ctx.message.channel, ctx.message.author_id)
            await ctx.reply.send(f"Simulation `{sim_id}` started (job `{job.id}`) with "
                                 f"{plural(len(spec.documents), 'document')}, {plural(agents, 'agent')} at most, "
                                 f"{plural(rounds, 'round')}; estimated "
                                 f"{cost.describe()}. /sim status {sim_id} shows its steps.{clamps}")

        if needs_confirmation(app.config, cost):
            confirmations = app.services["confirmations"]
            code = confirmations.ask(ctx.scope, ctx.message.author_id, start)
            app.files.hold(paths, confirmations.ttl_s)  # start() copies them once confirmed
            await ctx.reply.send(f"This simulation ({len(docs)} document(s), {agents} agents at most, "
                                 f"{rounds} rounds) would take {cost.describe()}.{clamps}\n"
                                 f"Type /confirm {code} within 10 minutes to start it.")
            return
        await start()

    @reg.command("sims", "Simulations of this server or chat", group="simulation")
    async def list_sims(ctx: CommandContext) -> None:
        rows = await sims.listing(ctx.scope)
        if not rows:
            await ctx.reply.send("No simulations yet. /simulate <file> <what to predict> starts one.")
            return
        total = len(sims.steps)
        await ctx.reply.send("\n".join(f"`{r.id}` {r.state or 'queued'} · {r.steps}/{total} steps · "
                                       f"{clip(r.requirement, 60)}" for r in rows))
