"""``/sim status <id>``: a simulation's job, each pipeline step (done with its LLM use and
summary, running with its latest progress, or pending) and its run."""
from __future__ import annotations

from bot.commands.registry import CommandContext
from bot.features.simulation.access import clip, simulations
from bot.features.simulation.actions import SimAction, sim_actions
from engine.sim.records import SimRecord
from engine.sim.simulations import Simulations
from engine.words import plural


async def status_text(sims: Simulations, sim: SimRecord) -> str:
    done = await sims.completed_steps(sim.id)
    job = await sims.job_of(sim)
    lines = [f"Simulation `{sim.id}`: {clip(sim.requirement, 200)}"]
    if job is not None:
        pct = f" {job.progress * 100:.0f}%" if job.progress is not None and not job.finished else ""
        lines.append(f"job `{job.id}`: {job.state}{pct}" + (f" — {job.error}" if job.error else
                                                            (f" · {job.message}" if job.message else "")))
    running = job is not None and job.state == "running"
    for number, (name, _) in enumerate(sims.steps, 1):
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
    state = await sims.run_state(sim.id)
    if state is not None:
        live = " · environment open for interviews" if state.live and state.status == "idle" else ""
        lines.append(f"run: {state.describe()}{live}")
    if job is not None and job.state in ("interrupted", "failed", "cancelled", "stopped") and job.resumable:
        lines.append(f"/resume {job.id} continues from the first unfinished step.")
    return "\n".join(lines)


def setup(app) -> None:
    sims = simulations(app)

    async def status(ctx: CommandContext, sim: SimRecord) -> None:
        await ctx.reply.send(await status_text(sims, sim))

    sim_actions(app).add(SimAction("status", "status", status))
