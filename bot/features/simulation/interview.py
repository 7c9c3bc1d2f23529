"""``/interview <sim> <agent or all> <question> [--platform P]``: ask a simulation's agents,
during the run or after it (a finished run is reopened from its databases).

When the run's agents cannot be reached (its databases are gone), the answers are role-played
from the agents' personas and every such answer is labelled so. Agents that could not answer
for one same reason are told in one line ("12 agents could not answer: <reason>"), not one
line each. The person who started the simulation and administrators may interview; it spends on
the LLM, so in a direct message only the bot's owners may (bot.permissions ``costly``). The report
agent's interview tool in report chat obeys the same rule (``may_interview``). An ensemble's agents
are asked in its median-most run (name a run by its own id, ``<sim>-r2``, to ask another).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from bot.commands.registry import Arg, CommandContext, UsageError
from bot.features.simulation.access import find_sim, sim_starter_or_admin, simulations
from bot.permissions import costly
from bot.public import public
from engine.i18n import N_, _
from engine.jobs import JobError
from engine.llm.client import person_waiting
from engine.sim.simulations import PERSONA_LABEL, Answer, RunUnreachable, SimulationConfig, Simulations
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
            raise UsageError(_("no agent {agent} in this simulation; give an id, a name, a username or all",
                               agent=repr(part)))
        ids += found
    return sorted(set(ids))


def format_answers(sim_id: str, question: str, answers: list[Answer]) -> str:
    lines = [_("Interview in simulation `{sim}`: “{question}”", sim=sim_id, question=question)]
    failed: dict[str, list[Answer]] = {}
    for a in answers:
        who = _("{name} [{platform}, agent {agent}, after round {round}]", name=a.name, platform=a.platform,
                agent=a.agent_id, round=a.round)
        if a.answer and a.answer.strip():
            lines.append(f"• {who}: {a.answer.strip()}")
        else:
            failed.setdefault(public(a.error) if a.error else _("it gave an empty answer"), []).append(a)
    for reason, group in failed.items():
        agents = {a.agent_id for a in group}
        if len(group) == 1:
            a = group[0]
            lines.append("• " + _("{name} [{platform}, agent {agent}, after round {round}]: (no answer: {reason})",
                                  name=a.name, platform=a.platform, agent=a.agent_id, round=a.round, reason=reason))
        else:
            lines.append(plural(len(agents), "{n} agent could not answer: {reason}",
                                "{n} agents could not answer: {reason}", reason=reason))
    return "\n".join(lines)


async def in_character(sims: Simulations, sim_id: str, folder: Path, agent_ids: list[int] | None, question: str,
                       platform: str, scope: str, why: str, lang: str) -> str:
    """Answers role-played from the personas (in the simulation's language, as its agents'), for
    when the live agents cannot be asked."""
    answers = await sims.interview_in_character(folder, agent_ids, question, platform, scope, lang)
    lines = [_("Interview in simulation `{sim}`: “{question}”", sim=sim_id, question=question),
             _("(the run's agents cannot be asked: {why})", why=public(why))]
    lines += ["• " + _("@{user} [{platform}, agent {agent}] ({label}): {answer}", user=a.username, platform=a.platform,
                       agent=a.agent_id, label=_(PERSONA_LABEL), answer=a.answer) for a in answers]
    return "\n".join(lines)


INTERVIEWERS = sim_starter_or_admin("sim", N_("interview its agents"))


async def may_interview(ctx: CommandContext, sim_id: str) -> bool:
    """Whether the person asking may interview simulation ``sim_id``'s agents (/interview's rule)."""
    return await INTERVIEWERS.refuse(dataclasses.replace(ctx, args={"sim": sim_id}), "/interview") is None


def setup(app) -> None:
    sims = simulations(app)

    @app.commands.command("interview", N_("Ask a simulation's agents a question, during the run or after it"), [
        Arg("sim", N_("simulation id")),
        Arg("agent", N_("agent id, name or username (several: a,b), or all")),
        Arg("question", N_("the question"), type="text"),
        Arg("platform", N_("twitter, reddit or both (default both)"), type="choice",
            choices=(N_("twitter"), N_("reddit"), N_("both")), required=False, option=True),
    ], group="simulation", permission=costly(app, INTERVIEWERS))
    async def interview(ctx: CommandContext) -> None:
        sim = await find_sim(ctx, ctx.args["sim"])
        try:
            run, which = await sims.pick_run(sim)
        except JobError as err:
            raise UsageError(str(err)) from None
        which = _(", run {run} (`{id}`), {which}", run=run.run_no, id=run.id, which=which) if run.id != sim.id else ""
        sim = run
        state = await sims.run_state(sim.id)
        if state is None:
            raise UsageError(_("simulation {sim} has not reached its run yet; /sim status {sim} shows where it is.",
                               sim=sim.id))
        cfg = sims.run_config(state)
        agent_ids = resolve_agents(cfg, ctx.args["agent"])
        platform = ctx.args.get("platform") or "both"
        platforms = None if platform == "both" else [platform]
        who = _("all agents") if agent_ids is None else plural(len(agent_ids), "{n} agent", "{n} agents")
        question = ctx.args["question"].strip()
        await ctx.reply.send(_("Asking {who} of simulation `{sim}`{which}… (a finished run is reopened first)", who=who,
                               sim=sim.id, which=which))
        try:
            async with ctx.reply.typing():
                answers = await sims.interview(sim, agent_ids, ctx.args["question"], platforms,
                                               asked_by=f"{ctx.message.platform}:{ctx.message.author_id}")
        except RunUnreachable as err:
            if sims.llm is None:
                raise
            async with ctx.reply.typing():
                with person_waiting():
                    text = await in_character(sims, sim.id, Path(state.folder), agent_ids, question,
                                              platform, ctx.scope, str(err), sim.spec.language)
            await ctx.reply.send(text)
            return
        await ctx.reply.send(format_answers(sim.id, question, answers))
