"""``/graph <sim>``: a simulation's knowledge graph to look at, as a picture (PNG, sized for the
chat) and as an interactive page (a self-contained HTML file that opens offline in any browser:
hover an entity or a line, hide a type from the legend, pan and zoom), drawn by
engine.sim.graph.view through ``Simulations.draw_graph`` into ``<sim folder>/graph/``.

Anyone who may see the simulation may ask (``find_sim``: a simulation of another chat, or of an
audience this channel does not read, is as unknown as a wrong id), and the files are posted in the
channel that asked, like a report's. No LLM is used. Before step 2 has built the graph: one line.
"""
from __future__ import annotations

from bot.commands.registry import Arg, CommandContext
from bot.features.simulation.access import find_sim, simulations
from engine.i18n import N_, _
from engine.words import plural


def setup(app) -> None:
    sims = simulations(app)

    @app.commands.command("graph", N_("A simulation's knowledge graph: a picture, and a page to explore offline"), [
        Arg("sim", N_("simulation id"))], group="simulation")
    async def graph(ctx: CommandContext) -> None:
        sim = await find_sim(ctx, ctx.args["sim"])
        async with ctx.reply.typing():
            picture = await sims.draw_graph(sim)
        types = ", ".join(f"{name} {n}" for name, n in list(picture.types.items())[:8])
        more = (_(" and {types}", types=plural(len(picture.types) - 8, "{n} other type", "{n} other types"))
                if len(picture.types) > 8 else "")
        shown = (_(" (the picture shows the {n} most connected)", n=picture.shown) if picture.shown < picture.entities
                 else "")
        by_type = _("; by type: {types}{more}", types=types, more=more) if types else ""
        await ctx.reply.send(_("🕸 Knowledge graph of simulation `{sim}`: {entities}{shown}, {facts}{by_type}. {page} "
                               "opens in any browser, offline: hover an entity for its summary or a line for its "
                               "facts, click a type in the legend to hide it.", sim=sim.id,
                               entities=plural(picture.entities, "{n} entity", "{n} entities"), shown=shown,
                               facts=plural(picture.facts, "{n} fact", "{n} facts"), by_type=by_type,
                               page=picture.html.name))
        await ctx.reply.upload(picture.png, caption=_("Knowledge graph of {sim}", sim=sim.id), image=True)
        await ctx.reply.upload(picture.html, caption=_("Knowledge graph of {sim}, to explore in a browser", sim=sim.id))
