"""``/sim agents <sim>``: a simulation's agents, each with the entity it speaks for, its persona in
a line, its platforms and where it stands now: its latest stance on each platform (the label, the
score from -1 against to +1 for, and the round it was classified in; engine.sim.stance), or,
before any round was classified, the stance its persona starts from. Read by
``Simulations.agents`` (engine.sim.roster); anyone who may see the simulation may ask. Before
step 3 has made the agents: one line."""
from __future__ import annotations

from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import clip, simulations
from bot.features.simulation.actions import SimAction, SimActions
from engine.i18n import N_, _
from engine.sim.simulations import Agent, SimRecord
from engine.words import plural

BIO_CHARS = 110
# the stances a persona starts from (engine.sim.environment.personas.STANCES), as people read them
STARTS = {"supportive": N_("supportive"), "opposing": N_("opposing"), "neutral": N_("neutral"),
          "observer": N_("observer")}


def agent_line(agent: Agent) -> str:
    where = ", ".join(agent.platforms)
    if agent.latest:
        stance = "; ".join(_("{platform} {label} ({score}, round {round})", platform=p, label=_(s.label),
                               score=f"{s.score:+.1f}", round=s.round) for p, s in sorted(agent.latest.items()))
    else:
        stance = _("starts {stance}", stance=_(STARTS.get(agent.starting_stance, agent.starting_stance)))
    bio = f" — {clip(' '.join(agent.bio.split()), BIO_CHARS)}" if agent.bio.strip() else ""
    return f"{agent.agent_id}. {agent.name} (@{agent.username}, {agent.entity_type}, " + _("on {platforms}",
                                                                                         platforms=where) + \
        f"){bio} · {stance}"


def setup(app, actions: SimActions) -> None:
    sims = simulations(app)

    async def agents(ctx: CommandContext, sim: SimRecord) -> None:
        found = await sims.agents(sim)
        if found is None:
            raise UsageError(_("simulation {sim} has no agents yet: step 3 (environment) makes them. /sim status "
                               "{sim} shows its steps.", sim=sim.id))
        tracked = any(a.latest for a in found)
        head = "👥 " + (_("{agents} of simulation `{sim}`, with each one's latest stance per platform (score: -1 "
                          "against … +1 for):", agents=plural(len(found), "{n} agent", "{n} agents"), sim=sim.id)
                        if tracked else
                        _("{agents} of simulation `{sim}`, with the stance each starts from (no round classified "
                          "yet):", agents=plural(len(found), "{n} agent", "{n} agents"), sim=sim.id))
        await ctx.reply.send("\n".join([head, *(agent_line(a) for a in found)]))

    actions.add(SimAction(N_("agents"), N_("agents"), agents))
