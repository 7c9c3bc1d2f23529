"""Control of running simulations and interviews of their agents.

``/sim stop <id>`` and ``/sim resume <id>`` (actions of the ``/sim`` command defined in
bot.features.simulation) and ``/interview <sim> <agent or all> <question> [--platform P]``.
The run itself is step 4 of the simulation pipeline (engine.sim.run.step). When the run's agents
cannot be reached (its databases are gone), /interview answers in character from the agents'
personas and labels every such answer so. Agents that could not answer for one same reason are
told in one line ("12 agents could not answer: <reason>"), not one line each.
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation import sim_starter_or_admin
from engine.llm.client import person_waiting
from engine.offload import run_cpu
from engine.sim.envmodels import CONFIG_FILE, SimulationConfig
from engine.sim.report.sources import PERSONA_LABEL, PersonaInterviewer, load_roster
from engine.sim.run import step
from engine.sim.run.service import Answer, RunUnreachable, SimRuns
from engine.words import plural

log = logging.getLogger(__name__)


def runs(app) -> SimRuns:
    return app.services["sim_runs"]


async def find_sim(app, ctx: CommandContext, sim_id: str):
    row = await app.db.fetchone("SELECT * FROM simulations WHERE id=? AND scope=?", (sim_id, ctx.scope))
    if row is None:
        raise UsageError(f"no simulation {sim_id} here. /sims lists them.")
    return row


def resolve_agents(cfg: SimulationConfig, spec: str) -> list[int] | None:
    """'all' -> None; otherwise ids, names or usernames separated by commas."""
    if spec.strip().lower() in ("all", "*", "everyone"):
        return None
    ids = []
    for part in (p.strip().lstrip("@") for p in spec.split(",") if p.strip()):
        found = [a.agent_id for a in cfg.agents
                 if part == str(a.agent_id) or part.lower() in (a.name.lower(), a.username.lower())]
        if not found:
            raise UsageError(f"no agent {part!r} in this simulation; give an id, a name, a username or all")
        ids += found
    return sorted(set(ids))


def format_answers(sim_id: str, question: str, answers: list[Answer]) -> str:
    lines = [f"Interview in simulation `{sim_id}`: “{question}”"]
    failed: dict[str, list[Answer]] = {}
    for a in answers:
        if a.answer and a.answer.strip():
            lines.append(f"• {a.name} [{a.platform}, agent {a.agent_id}, after round {a.round}]: {a.answer.strip()}")
        else:
            failed.setdefault(a.error or "it gave an empty answer", []).append(a)
    for reason, group in failed.items():
        agents = {a.agent_id for a in group}
        if len(group) == 1:
            a = group[0]
            lines.append(f"• {a.name} [{a.platform}, agent {a.agent_id}, after round {a.round}]: (no answer: {reason})")
        else:
            who = "1 agent" if len(agents) == 1 else f"{len(agents)} agents"
            lines.append(f"{who} could not answer: {reason}")
    return "\n".join(lines)


async def in_character(llm, sim_id: str, folder: Path, agent_ids: list[int] | None, question: str,
                       platform: str, scope: str, why: str) -> str:
    """Answers role-played from the personas, for when the live agents cannot be asked."""
    roster = await run_cpu(load_roster, folder)
    agents = [a for a in roster if (agent_ids is None or a.agent_id in agent_ids)
              and (platform == "both" or platform in a.platforms)]
    answers = await PersonaInterviewer(llm, folder, scope=scope).interview(agents, question, platform)
    lines = [f"Interview in simulation `{sim_id}`: “{question}”",
             f"(the run's agents cannot be asked: {why})"]
    lines += [f"• @{a.username} [{a.platform}, agent {a.agent_id}] ({PERSONA_LABEL}): {a.answer}" for a in answers]
    return "\n".join(lines)


async def sim_stop(app, ctx: CommandContext, row) -> None:
    service = runs(app)
    if await service.executor.attach(row["id"]) is None:
        where = await service.elsewhere(row["id"])
        raise UsageError(f"simulation {row['id']} runs in {where}; stop it there." if where
                         else f"simulation {row['id']} is not running.")
    task = asyncio.create_task(service.stop(row["id"]), name=f"stop-{row['id']}")
    app.background.add(task)
    task.add_done_callback(app.background.discard)
    await ctx.reply.send(f"Stopping simulation `{row['id']}` at the end of the current round. "
                         f"/sim resume {row['id']} continues it later.")


async def sim_resume(app, ctx: CommandContext, row) -> None:
    if not row["job_id"]:
        raise UsageError(f"simulation {row['id']} has no job to resume.")
    job = await app.jobs.get(row["job_id"])
    if job is None:
        raise UsageError(f"simulation {row['id']} has no job to resume.")
    if job.state == "done":
        raise UsageError(f"simulation {row['id']} has finished; there is nothing to resume.")
    await app.jobs.resume(job.id)
    state = await runs(app).get(row["id"])
    where = ""
    if state is not None and state.rounds_done:
        where = " The run continues after round " + ", ".join(
            f"{p} {k}" for p, k in sorted(state.rounds_done.items())) + " if its checkpoint is intact."
    await ctx.reply.send(f"Resuming simulation `{row['id']}` (job `{job.id}`); finished steps are skipped.{where}")


async def run_status_line(app, sim_id: str) -> str | None:
    state = await runs(app).get(sim_id)
    if state is None:
        return None
    live = " · environment open for interviews" if state.live and state.status == "idle" else ""
    return f"run: {state.describe()}{live}"


def setup(app) -> None:
    step.register()
    llm = app.services.get("llm")
    service = step.runs_for(app.db, app.config, app.owner, llm.usage if llm is not None else None, llm)
    app.services["sim_runs"] = service

    async def recover() -> None:
        for sim_id in await service.recover():
            log.warning("simulation run %s was interrupted by a restart", sim_id)

    async def close() -> None:
        await service.executor.close()
        await service.close()

    app.on_start.append(recover)
    app.on_stop.append(close)

    @app.commands.command("interview", "Ask a simulation's agents a question, during the run or after it", [
        Arg("sim", "simulation id"),
        Arg("agent", "agent id, name or username (several: a,b), or all"),
        Arg("question", "the question", type="text"),
        Arg("platform", "twitter, reddit or both (default both)", type="choice",
            choices=("twitter", "reddit", "both"), required=False, option=True),
    ], group="simulation", permission=sim_starter_or_admin("sim", "interview its agents"))
    async def interview(ctx: CommandContext) -> None:
        row = await find_sim(app, ctx, ctx.args["sim"])
        state = await service.get(row["id"])
        if state is None:
            raise UsageError(f"simulation {row['id']} has not reached its run yet; /sim status {row['id']} shows where it is.")
        cfg = SimulationConfig.model_validate_json((Path(state.folder) / CONFIG_FILE).read_text(encoding="utf-8"))
        agent_ids = resolve_agents(cfg, ctx.args["agent"])
        platform = ctx.args.get("platform") or "both"
        platforms = None if platform == "both" else [platform]
        who = "all agents" if agent_ids is None else plural(len(agent_ids), "agent")
        await ctx.reply.send(f"Asking {who} of simulation `{row['id']}`… (a finished run is reopened first)")
        try:
            async with ctx.reply.typing():
                answers = await service.interview(row["id"], agent_ids, ctx.args["question"], platforms,
                                                  asked_by=f"{ctx.message.platform}:{ctx.message.author_id}")
        except RunUnreachable as err:
            llm = app.services.get("llm")
            if llm is None:
                raise
            async with ctx.reply.typing():
                with person_waiting():
                    text = await in_character(llm, row["id"], Path(state.folder), agent_ids,
                                              ctx.args["question"].strip(), platform, ctx.scope, str(err))
            await ctx.reply.send(text)
            return
        await ctx.reply.send(format_answers(row["id"], ctx.args["question"].strip(), answers))
