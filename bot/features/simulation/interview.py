"""``/interview <sim> <agent or all> <question> [--platform P]``: ask a simulation's agents,
during the run or after it (a finished run is reopened from its databases).

When the run's agents cannot be reached (its databases are gone), the answers are role-played
from the agents' personas and every such answer is labelled so. Agents that could not answer
for one same reason are told in one line ("12 agents could not answer: <reason>"), not one
line each. The person who started the simulation and administrators may interview.
"""
from __future__ import annotations

from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import find_sim, sim_starter_or_admin, simulations
from engine.llm.client import person_waiting
from engine.offload import run_cpu
from engine.sim.envmodels import CONFIG_FILE, SimulationConfig
from engine.sim.report.sources import PERSONA_LABEL, PersonaInterviewer, load_roster
from engine.sim.run.service import Answer, RunUnreachable
from engine.words import plural


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


def setup(app) -> None:
    sims = simulations(app)

    @app.commands.command("interview", "Ask a simulation's agents a question, during the run or after it", [
        Arg("sim", "simulation id"),
        Arg("agent", "agent id, name or username (several: a,b), or all"),
        Arg("question", "the question", type="text"),
        Arg("platform", "twitter, reddit or both (default both)", type="choice",
            choices=("twitter", "reddit", "both"), required=False, option=True),
    ], group="simulation", permission=sim_starter_or_admin("sim", "interview its agents"))
    async def interview(ctx: CommandContext) -> None:
        sim = await find_sim(ctx, ctx.args["sim"])
        state = await sims.run_state(sim.id)
        if state is None:
            raise UsageError(f"simulation {sim.id} has not reached its run yet; /sim status {sim.id} shows where it is.")
        cfg = SimulationConfig.model_validate_json((Path(state.folder) / CONFIG_FILE).read_text(encoding="utf-8"))
        agent_ids = resolve_agents(cfg, ctx.args["agent"])
        platform = ctx.args.get("platform") or "both"
        platforms = None if platform == "both" else [platform]
        who = "all agents" if agent_ids is None else plural(len(agent_ids), "agent")
        question = ctx.args["question"].strip()
        await ctx.reply.send(f"Asking {who} of simulation `{sim.id}`… (a finished run is reopened first)")
        try:
            async with ctx.reply.typing():
                answers = await sims.runs.interview(sim.id, agent_ids, ctx.args["question"], platforms,
                                                    asked_by=f"{ctx.message.platform}:{ctx.message.author_id}")
        except RunUnreachable as err:
            if sims.llm is None:
                raise
            async with ctx.reply.typing():
                with person_waiting():
                    text = await in_character(sims.llm, sim.id, Path(state.folder), agent_ids, question,
                                              platform, ctx.scope, str(err))
            await ctx.reply.send(text)
            return
        await ctx.reply.send(format_answers(sim.id, question, answers))
