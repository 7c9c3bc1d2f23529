"""/simulate, /sims, /sim status: simulations of how the events in a document unfold.

``/simulate`` checks the attached documents, registers the simulation and starts a job of
kind "simulation" (engine.sim.pipeline); the job's progress message follows in the channel.
A restart interrupts the job; /resume continues at the first unfinished step. Administrators
start simulations; stopping, resuming and interviewing one belong to the person who started
it and to administrators.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features import simfork
from bot.permissions import ADMIN, ByAction, Permission, StarterOrAdmin
from engine.documents import read_documents
from engine.jobs import JobError
from engine.sim import pipeline, sizing
from engine.sim.estimate import estimate
from engine.sim.fork import fork_rounds, lineage
from engine.sim.run.fork_points import describe_rounds
from engine.sim.graphstore import GraphStore
from engine.embedder import Embedder
from engine.words import plural


def _embedder(app) -> Embedder:
    """The shared embedder service (the model itself is loaded once per process, on first use)."""
    if "embedder" not in app.services:
        cfg = app.config.embedder
        app.services["embedder"] = Embedder(cfg.model, cfg.batch_size, cfg.device)
    return app.services["embedder"]


async def starter_of_sim(ctx: CommandContext, arg: str) -> str | None:
    """Who started the job of the simulation named by argument ``arg`` in this scope."""
    return await ctx.app.db.fetchval(
        "SELECT coalesce(j.started_by, '') FROM simulations s LEFT JOIN jobs j ON j.id = s.job_id"
        " WHERE s.id=? AND s.scope=?", (str(ctx.args.get(arg, "")), ctx.scope))


def sim_starter_or_admin(arg: str, verb: str) -> Permission:
    async def find(ctx: CommandContext) -> str | None:
        return await starter_of_sim(ctx, arg)
    return StarterOrAdmin(find, who="the person who started this simulation", verb=verb)


def setup(app) -> None:
    reg = app.commands
    _embedder(app)

    app.services["sim_graph"] = GraphStore(app.db, _embedder(app), app.config.simulation.graph_cache_size)

    async def run_simulation(job):
        llm = app.services.get("llm")
        if llm is None:
            raise JobError("no LLM is configured: set [llm] base_url in config.toml")
        handler = pipeline.job_handler(app.db, app.config, llm, _embedder(app), app.services["sim_graph"])
        result = await handler(job)
        await job.progress(1.0, f"{plural(result['llm_calls'], 'LLM call')}, {plural(result['tokens'], 'token')} used"
                           + (f", ≈ ${result['cost_usd']:.2f}" if result["cost_usd"] else ""))
        return result

    app.jobs.register("simulation", run_simulation)

    @reg.command("simulate", "Simulate how the events in documents unfold on social media", [
        Arg("files", "documents (.txt .md .pdf .docx .html)", type="attachment", multiple=True),
        Arg("requirement", "what the simulation should predict", type="text"),
        Arg("agents", "number of agents", type="int", required=False, option=True),
        Arg("rounds", "number of rounds (simulated hours by default)", type="int", required=False, option=True),
    ], permission=ADMIN, group="simulation")
    async def simulate(ctx: CommandContext) -> None:
        if "llm" not in app.services:
            raise UsageError("simulations need an LLM: set [llm] base_url in config.toml")
        try:
            sizing.check(ctx.args.get("agents"), ctx.args.get("rounds"))
        except JobError as err:
            raise UsageError(str(err)) from None
        attachments = ctx.args["files"]
        paths = []
        for att in attachments:
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
            sim_id, spec = await pipeline.create_simulation(
                app.db, app.config, paths, ctx.args["requirement"], ctx.scope, ctx.message.channel,
                agents=ctx.args.get("agents"), rounds=ctx.args.get("rounds"))
            job = await app.jobs.submit("simulation", {"sim_id": sim_id}, ctx.scope,
                                        channel=ctx.message.channel, title=f"simulation {sim_id}",
                                        started_by=ctx.message.author_id)
            await app.db.execute("UPDATE simulations SET job_id=? WHERE id=?", (job.id, sim_id))
            await ctx.reply.send(f"Simulation `{sim_id}` started (job `{job.id}`) with "
                                 f"{plural(len(spec.documents), 'document')}, {plural(agents, 'agent')} at most, "
                                 f"{plural(rounds, 'round')}; estimated "
                                 f"{cost.describe()}. /sim status {sim_id} shows its steps.{clamps}")

        if _needs_confirmation(app.config, cost):
            confirmations = app.services["confirmations"]
            code = confirmations.ask(ctx.scope, ctx.message.author_id, start)
            app.files.hold(paths, confirmations.ttl_s)  # start() copies them once confirmed
            await ctx.reply.send(f"This simulation ({len(docs)} document(s), {agents} agents at most, "
                                 f"{rounds} rounds) would take {cost.describe()}.{clamps}\n"
                                 f"Type /confirm {code} within 10 minutes to start it.")
            return
        await start()

    @reg.command("sims", "Simulations of this server or chat", group="simulation")
    async def sims(ctx: CommandContext) -> None:
        rows = await app.db.fetchall(
            "SELECT s.id, s.requirement, s.created_at, s.parent_id, s.fork_round, s.fork_event, j.state, j.progress,"
            " (SELECT count(*) FROM sim_steps t WHERE t.sim_id = s.id) AS steps"
            " FROM simulations s LEFT JOIN jobs j ON j.id = s.job_id WHERE s.scope=?"
            " ORDER BY s.created_at DESC, s.rowid DESC LIMIT 15", (ctx.scope,))
        if not rows:
            await ctx.reply.send("No simulations yet. /simulate <file> <what to predict> starts one.")
            return
        total = len(pipeline.STEPS)
        lines = [f"`{r['id']}`{lineage(r)} {r['state'] or 'queued'} · {r['steps']}/{total} steps · "
                 f"{_clip(r['requirement'], 60)}" for r in rows]
        await ctx.reply.send("\n".join(lines))

    @reg.command("sim", "One simulation: its status, stop or resume its run, or fork it at a round", [
        Arg("action", "status, stop (at the end of the round), resume or fork", type="choice",
            choices=("status", "stop", "resume", "fork")),
        Arg("id", "simulation id"),
        Arg("from_round", "fork: the completed round whose state the fork starts from", type="int",
            required=False, option=True),
        Arg("inject", "fork: an event published at the fork's first round", required=False, option=True),
        Arg("rounds", "fork: the fork's total rounds (default: the parent's)", type="int", required=False,
            option=True),
    ], group="simulation", permission=ByAction("action", {
            "stop": sim_starter_or_admin("id", "stop it"), "resume": sim_starter_or_admin("id", "resume it"),
            "fork": sim_starter_or_admin("id", "fork it")}))
    async def sim(ctx: CommandContext) -> None:
        sim_id = ctx.args["id"]
        row = await app.db.fetchone("SELECT * FROM simulations WHERE id=? AND scope=?", (sim_id, ctx.scope))
        if row is None:
            raise UsageError(f"no simulation {sim_id} here. /sims lists them.")
        action = ctx.args["action"]
        if action != "fork" and (given := [o for o in simfork.FORK_OPTIONS if o in ctx.args]):
            raise UsageError(f"--{given[0].replace('_', '-')} goes with /sim fork only. Usage: {simfork.USAGE}")
        if action == "status":
            await ctx.reply.send(await status_text(app, row))
            return
        if "sim_runs" not in app.services:
            raise UsageError("simulation runs are not enabled in this bot")
        from bot.features import simrun
        handler = {"stop": simrun.sim_stop, "resume": simrun.sim_resume, "fork": simfork.sim_fork}[action]
        await handler(app, ctx, row)


def _needs_confirmation(config, cost) -> bool:
    limit_usd, limit_tokens = config.simulation.confirm_above_usd, config.simulation.confirm_above_tokens
    if cost.usd is not None:
        return limit_usd > 0 and cost.usd > limit_usd
    return limit_tokens > 0 and cost.tokens > limit_tokens


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


async def status_text(app, row) -> str:
    done = await pipeline.completed_steps(app.db, row["id"])
    job = await app.jobs.get(row["job_id"]) if row["job_id"] else None
    lines = [f"Simulation `{row['id']}`{lineage(row)}: {_clip(row['requirement'], 200)}"]
    if job is not None:
        pct = f" {job.progress * 100:.0f}%" if job.progress is not None and not job.finished else ""
        lines.append(f"job `{job.id}`: {job.state}{pct}" + (f" — {job.error}" if job.error else
                                                            (f" · {job.message}" if job.message else "")))
    running = job is not None and job.state == "running"
    for number, (name, _) in enumerate(pipeline.STEPS, 1):
        info = done.get(name)
        if info is None:
            if running:  # the first unfinished step is the one under way
                detail = job.message.split("\n", 1)[0].removeprefix(f"{name}: ")
                shown = "" if detail.startswith("step ") else f" · {detail}"
                lines.append(f"{number}. {name}: running{shown}")
                running = False
            else:
                lines.append(f"{number}. {name}: pending")
            continue
        facts = ", ".join(f"{k} {v}" for k, v in info["summary"].items()
                          if isinstance(v, (int, float, str)) and not isinstance(v, bool))
        lines.append(f"{number}. {name}: done · {plural(info['llm_calls'], 'LLM call')}, {plural(info['tokens'], 'token')}"
                     + (f" · {facts}" if facts else ""))
    if "sim_runs" in app.services:
        from bot.features import simrun
        if (line := await simrun.run_status_line(app, row["id"])) is not None:
            lines.append(line)
            if rounds := await fork_rounds(app.db, row["id"]):
                lines.append(f"can be forked after rounds {describe_rounds(rounds)}: "
                             f"/sim fork {row['id']} --from-round K")
    if job is not None and job.state in ("interrupted", "failed", "cancelled", "stopped") and job.resumable:
        lines.append(f"/resume {job.id} continues from the first unfinished step.")
    return "\n".join(lines)
