"""/simulate and /sims: start a simulation of how the events in documents unfold, list them.

``/simulate`` starts from the attached documents, or, with none, from a seed brief
(engine.sim.seed): drafted by the LLM from the requirement (one call, shown before anything else
and counted in the estimate), or taken from this chat's memory with ``--world W`` or
``--from-chat [--since 7d]`` as this channel's audience reads it (a world it may not read is
refused like one that does not exist; the simulation takes this channel's audience as always).
It estimates the cost and starts the simulation's pipeline job through the Simulations service
(after ``/confirm`` when the estimate is above ``[simulation] confirm_above_usd`` /
``confirm_above_tokens``, which only an administrator of the server or group, or one of the bot's
owners, may give); the job's progress message follows in the channel. Administrators start
simulations; it spends on the LLM, so in a direct message only the bot's owners may
(bot.permissions ``costly``). A simulation whose estimate is more than a budget still allows today
(a guest server's, engine.llm.usage) is refused before it starts, and so is one over
``[simulation] max_active_per_scope`` / ``max_active_per_user`` (engine.jobs).
``--runs N`` makes it an ensemble (engine.sim.ensemble): its estimate, budget check and caps count
all N runs. ``/sims`` shows each simulation's runs, the score of its forecast once an outcome was
recorded (/sim outcome), and the chat's track record.
What the simulation writes is in ``--lang`` when given, else in its requirement's language (or its
documents' or brief's when the requirement is English: engine.sim.context.spec_language).
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError, shown
from bot.features.simulation.access import clip, simulations
from bot.permissions import ADMIN, costly
from engine import language
from engine.documents import Document, read_documents
from engine.i18n import N_, _
from engine.jobs import QUEUED, JobError, state_name
from engine.memory.catchup import parse_since
from engine.memory.models import utcnow
from engine.sim.simulations import BRIEF_FILE, lineage, score_text, track_record_line
from engine.words import plural

# What the agent count means since the crowd fill (engine.sim.environment.crowd): as many as asked.
CROWD_NOTE = N_(" (the actors the documents name, then members of the public)")


def since_moment(config, since: str | None) -> datetime | None:
    """``--since`` as a moment (in ``[memory] timezone`` where it names none), or None."""
    if not since:
        return None
    try:
        return parse_since(since, utcnow(), config.memory.timezone)
    except ValueError as err:
        raise UsageError(str(err)) from None


def needs_confirmation(config, cost) -> bool:
    limit_usd, limit_tokens = config.simulation.confirm_above_usd, config.simulation.confirm_above_tokens
    if cost.usd is not None:
        return limit_usd > 0 and cost.usd > limit_usd
    return limit_tokens > 0 and cost.tokens > limit_tokens


def setup(app) -> None:
    reg = app.commands
    sims = simulations(app)

    @reg.command("simulate", N_("Simulate how events unfold on social media, from documents, the question alone or "
                                "this chat's memory"), [
        Arg("files", N_("documents (.txt .md .pdf .docx .html); none: the LLM drafts a brief from the requirement"),
            type="attachment", multiple=True, required=False),
        Arg("requirement", N_("what the simulation should predict"), type="text"),
        Arg("agents", N_("number of agents"), type="int", required=False, option=True),
        Arg("rounds", N_("number of rounds (simulated hours by default)"), type="int", required=False, option=True),
        Arg("runs", N_("runs with different seeds, reported with their spread (default 1)"), type="int",
            required=False, option=True),
        Arg("world", N_("start from this chat's memory of one world (name or id; /worlds lists them)"),
            required=False, option=True),
        Arg("from_chat", N_("start from this channel's memory (the last days: --since)"), type="flag",
            required=False, option=True),
        Arg("since", N_("with --world or --from-chat: messages since (7d, 24h, yesterday, 2025-03-01)"),
            required=False, option=True),
        Arg("lang", N_("language it writes in, e.g. en, pt-BR, th (default: the requirement's)"), required=False,
            option=True),
    ], permission=costly(app, ADMIN), group="simulation")
    async def simulate(ctx: CommandContext) -> None:
        if sims.llm is None:
            raise UsageError(_("simulations need an LLM: set [llm] base_url in config.toml"))
        asked = ctx.args.get("lang")
        if asked is not None and language.normalize(asked) is None:
            raise UsageError(_("--lang {code}: not a language code; give one such as en, pt-BR or th",
                               code=shown(asked, quote=False)))
        try:
            sims.check_sizes(ctx.args.get("agents"), ctx.args.get("rounds"), ctx.args.get("runs"))
        except JobError as err:
            raise UsageError(str(err)) from None
        world, from_chat, since = ctx.args.get("world"), bool(ctx.args.get("from_chat")), ctx.args.get("since")
        paths = []
        for att in ctx.args.get("files") or []:
            if att.path is None:
                raise UsageError(_("{file}: the file could not be downloaded", file=att.filename))
            paths.append(Path(att.path))
        if (world or from_chat) and paths:
            raise UsageError(_("a simulation starts from documents or from this chat's memory (--world, "
                               "--from-chat), not both"))
        if world and from_chat:
            raise UsageError(_("--world or --from-chat: one of them"))
        if since and not (world or from_chat):
            raise UsageError(_("--since goes with --world or --from-chat"))
        sizes = sims.sizes(ctx.args.get("agents"), ctx.args.get("rounds"), ctx.args.get("runs"))
        await app.jobs.check_caps("simulation", ctx.scope, ctx.message.author_id, sizes.runs)
        if len(paths) > app.config.documents.max_files:
            raise UsageError(_("too many documents ({n}; the limit is {most})", n=len(paths),
                               most=app.config.documents.max_files))
        requirement = ctx.args["requirement"]
        agents, rounds = sizes.agents, sizes.rounds
        runs = ", " + plural(sizes.runs, "{n} run", "{n} runs") if sizes.runs > 1 else ""
        crowd = _(CROWD_NOTE)
        brief, brief_cost = None, None
        if world or from_chat:
            brief = await sims.memory_brief(ctx.viewer, world=world, since=since_moment(app.config, since),
                                            channel=ctx.message.channel if from_chat else None)
        elif not paths:
            drafting = sims.brief_cost(requirement)
            if (short := await sims.llm.usage.short_of(None, ctx.scope, drafting[1], None)) is not None:
                raise UsageError(_("no brief can be drafted: {why}", why=short))
            async with ctx.reply.typing():
                brief = await sims.draft_brief(requirement, ctx.scope, ctx.args.get("lang"))
            brief_cost = sims.brief_cost(requirement, brief)
            await ctx.reply.send(_("📝 No document given: the LLM drafted this brief from your question; the "
                                   "simulation starts from it (kept as its document {file}).", file=BRIEF_FILE)
                                 + f"\n\n{brief.body}")
        docs = [Document(BRIEF_FILE, brief.render())] if brief else await read_documents(paths, app.config.documents)
        cost = await sims.estimate(docs, requirement, sizes, brief_cost)
        clamps = "".join("\n" + _("Note: {note}.", note=note) for note in sizes.notes)
        spent = brief_cost[1] if brief_cost else 0   # the brief's call is spent already
        if (short := await sims.llm.usage.short_of(None, ctx.scope, cost.tokens - spent, cost.usd)) is not None:
            raise UsageError(_("this simulation cannot start: {why}", why=short))
        source = (_("from a brief {brief}", brief=brief.describe()) if brief
                  else plural(len(docs), "{n} document", "{n} documents"))

        async def start() -> None:
            sim_id, spec = await sims.create(paths, requirement, ctx.scope, ctx.message.channel,
                                             agents=ctx.args.get("agents"), rounds=ctx.args.get("rounds"),
                                             audience=ctx.message.audience, brief=brief, runs=ctx.args.get("runs"),
                                             texts=[d.text for d in docs], language=asked)
            job = await sims.submit(sim_id, ctx.scope, ctx.message.channel, ctx.message.author_id)
            began = (_("from its brief {file}, {brief};", file=BRIEF_FILE, brief=brief.describe()) if brief
                     else _("with {documents},", documents=plural(len(spec.documents), "{n} document",
                                                                  "{n} documents")))
            await ctx.reply.send(_("Simulation `{sim}` started (job `{job}`) {began} {agents}{crowd}, {rounds}{runs}, "
                                   "written in {language}; estimated {cost}. /sim status {sim} shows its steps.",
                                   sim=sim_id, job=job.id, began=began,
                                   agents=plural(agents, "{n} agent", "{n} agents"), crowd=crowd,
                                   rounds=plural(rounds, "{n} round", "{n} rounds"), runs=runs,
                                   language=language.shown(spec.language), cost=cost.describe()) + clamps)

        if needs_confirmation(app.config, cost):
            confirmations = app.confirmations
            code = confirmations.ask(ctx.scope, start)
            app.files.hold(paths, confirmations.ttl_s)  # start() copies them once confirmed
            await ctx.reply.send(_("This simulation ({source}, {agents}{crowd}, {rounds}{runs}) would take {cost}.",
                                   source=source, agents=plural(agents, "{n} agent", "{n} agents"), crowd=crowd,
                                   rounds=plural(rounds, "{n} round", "{n} rounds"), runs=runs, cost=cost.describe())
                                 + clamps + "\n"
                                 + _("Type /confirm {code} within 10 minutes to start it (an administrator of this "
                                     "server or group, or one of the bot's owners, may).", code=code))
            return
        await start()

    @reg.command("sims", N_("Simulations of this server or chat"), group="simulation")
    async def list_sims(ctx: CommandContext) -> None:
        rows = await sims.listing(ctx.viewer)  # those this channel's audience may read
        if not rows:
            await ctx.reply.send(_("No simulations yet. /simulate [<file>] <what to predict> starts one (with no "
                                   "file, from a brief the LLM drafts, or from this chat's memory: --world, "
                                   "--from-chat)."))
            return
        total = len(sims.steps)
        lines = [f"`{r.id}`{lineage(r)} {state_name(r.state or QUEUED)} · "
                 + _("{done}/{total} steps", done=r.steps, total=total)
                 + (" · " + plural(r.runs, "{n} run", "{n} runs") if r.runs > 1 else "")
                 + f"{score_text(r)} · {clip(r.requirement, 60)}" for r in rows]
        lines.append(track_record_line(await sims.track_record(ctx.viewer)))
        await ctx.reply.send("\n".join(lines))
