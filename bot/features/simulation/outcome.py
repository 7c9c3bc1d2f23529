"""``/sim outcome <sim> <what happened>``: record what really happened, and have the forecast scored.

Any time after a simulation has run, the person who started it or an administrator records its
real outcome; the report agent then scores the forecast against it in a background job of kind
"outcome" (engine.sim.outcome through ``Simulations.score_outcome``): per run and overall, on a
0-10 scale, with what it got right and wrong, each point citing posts or rounds. The score is
posted in the channel when done; ``/sims`` shows it and the chat's track record, ``/sim status``
the outcome, and the daily digest the simulations newly scored. Scoring calls the LLM, so in a
direct message only the bot's owners may (bot.permissions ``costly``); a budget reached is said
before anything is recorded. A new outcome replaces the old one and is scored again.
"""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import clip, sim_starter_or_admin, simulations
from bot.features.simulation.actions import SimAction, SimActions
from bot.permissions import costly
from engine.i18n import N_, _
from engine.jobs import JobError
from engine.llm import BudgetExceeded
from engine.memory.audience import Viewer
from engine.sim.simulations import SimRecord

ARGS = [Arg("text", N_("outcome: what really happened"), type="text", required=False)]


def setup(app, actions: SimActions) -> None:
    sims = simulations(app)

    async def outcome_job(job) -> dict:
        # /sim outcome found it where it was asked: the job's channel may see it
        sim = await sims.get(job.params["sim_id"], Viewer.operator(job.job.scope))
        if sim is None:
            raise JobError(_("simulation {sim} is gone", sim=job.params["sim_id"]))
        await job.progress(0.1, _("scoring the forecast against the outcome"))
        scoring = await sims.score_outcome(sim, job=job.id, scope=job.job.scope)
        reply = app.reply_to(job.job.scope, job.job.channel) if job.job.channel else None
        if reply is not None:
            await reply.send(scoring.describe(sim.id))
        return {"sim_id": sim.id, "score": scoring.score, "unverified": scoring.unverified}

    app.jobs.register("outcome", outcome_job)

    async def outcome(ctx: CommandContext, sim: SimRecord) -> None:
        text = (ctx.args.get("text") or "").strip()
        if not text:
            raise UsageError(_("say what really happened. Usage: /sim outcome {sim} <what happened>", sim=sim.id))
        if sims.llm is None:
            raise UsageError(_("scoring a forecast needs an LLM: set [llm] base_url in config.toml"))
        if not await sims.ran(sim):
            raise UsageError(_("simulation {sim} has not run yet: there is no forecast to score.", sim=sim.id))
        try:
            await sims.llm.usage.check(None, ctx.scope)
        except BudgetExceeded as err:
            raise UsageError(_("the forecast cannot be scored now: {why}", why=err)) from None
        msg = ctx.message
        try:
            kept = await sims.record_outcome(sim, text, f"{msg.platform}:{msg.author_id}")
        except JobError as err:
            raise UsageError(str(err)) from None
        job = await app.jobs.submit("outcome", {"sim_id": sim.id}, ctx.scope, channel=msg.channel,
                                    title=_("outcome {sim}", sim=sim.id), started_by=msg.author_id)
        await ctx.reply.send(_("📌 Outcome of `{sim}` recorded: “{outcome}”. Scoring the forecast against it (job "
                               "`{job}`); the score will be posted here.", sim=sim.id, outcome=clip(kept, 300),
                               job=job.id))

    actions.add(SimAction(N_("outcome"), N_("outcome (what really happened)"), outcome,
                          costly(app, sim_starter_or_admin("id", N_("record its outcome"))), ARGS))
