"""``/sim status <id>``: a simulation's language, its documents (a brief it started from without
one, with the lines of it taken from memory that their authors have since forgotten), its job,
each pipeline step (done with its LLM use and summary, running with its latest progress, or
pending), its run, the latest belief split per platform ("beliefs after round 4: twitter 5 for ·
2 neutral · 1 against; reddit …") and the events injected into it. The environment step says how
many agents the documents name and how many were drawn from the public. An ensemble
(engine.sim.ensemble) shows each run's progress on a line of its own, then what the runs say
together (the confidence line); one of its runs says whose run it is."""
from __future__ import annotations

from bot.commands.registry import CommandContext
from bot.features.simulation.access import clip, simulations
from bot.features.simulation.actions import SimAction, SimActions
from bot.public import job_error
from engine import language
from engine.i18n import N_, _
from engine.jobs import state_name
from engine.sim.simulations import (
    SimRecord,
    Simulations,
    describe_rounds,
    fact_name,
    lineage,
    step_line,
    step_name,
)
from engine.words import plural


async def ensemble_lines(sims: Simulations, sim: SimRecord) -> list[str]:
    """Each run's progress, then the confidence line once beliefs were classified."""
    members = await sims.members(sim)
    if not members:
        return [_("runs: {n}, not started yet", n=sim.runs)]
    lines = [_("runs: {n}", n=len(members))]
    for m in members:
        state = await sims.run_state(m.id)
        lines.append("• " + _("run {run} `{sim}`: {state}", run=m.run_no, sim=m.id,
                              state=state.describe() if state is not None else _("waiting")))
    ensemble = await sims.ensemble(sim, with_stats=False)
    if ensemble is not None and ensemble.spread.runs:
        lines.append(f"🎯 {ensemble.spread.confidence_line()}")
    return lines


async def status_text(sims: Simulations, sim: SimRecord) -> str:
    done = await sims.completed_steps(sim.id)
    job = await sims.job_of(sim)
    lines = [_("Simulation `{sim}`{lineage}: {requirement}", sim=sim.id, lineage=lineage(sim),
               requirement=clip(sim.requirement, 200)),
             _("written in {language}", language=language.describe(sim.spec.language))]
    if sim.ensemble_of:
        lines.append(_("run {run} of simulation `{sim}` (an ensemble: /sim status {sim} shows every run)",
                       run=sim.run_no, sim=sim.ensemble_of))
    brief = await sims.brief_state(sim.id)
    if brief is not None:
        lines += brief.describe()
    elif sim.spec.documents:
        lines.append(_("documents: {names}", names=clip(", ".join(sim.spec.documents), 300)))
    if job is not None:
        pct = f" {job.progress * 100:.0f}%" if job.progress is not None and not job.finished else ""
        lines.append(_("job `{job}`: {state}", job=job.id, state=state_name(job.state)) + pct
                     + (f" — {job_error(job)}" if job.error else (f" · {job.message}" if job.message else "")))
    running = job is not None and job.state == "running"
    for number, (name, _step) in enumerate(sims.steps, 1):
        info = done.get(name)
        if info is None:
            if running and job is not None:  # the first unfinished step is the one under way: the line it reported last
                line, prefix = job.message.split("\n", 1)[0], step_line(name, "")
                shown = f" · {line.removeprefix(prefix)}" if line.startswith(prefix) else ""
                lines.append(f"{number}. {step_name(name)}: {state_name('running')}{shown}")
                running = False
            else:
                lines.append(_("{number}. {step}: pending", number=number, step=step_name(name)))
            continue
        facts = ", ".join(f"{fact_name(k)} {v}" for k, v in info["summary"].items()
                          if isinstance(v, (int, float, str)) and not isinstance(v, bool))
        lines.append(_("{number}. {step}: done · {calls}, {tokens}", number=number, step=step_name(name),
                       calls=plural(info["llm_calls"], "{n} LLM call", "{n} LLM calls"),
                       tokens=plural(info["tokens"], "{n} token", "{n} tokens")) + (f" · {facts}" if facts else ""))
    if sim.runs > 1:
        lines += await ensemble_lines(sims, sim)
    state = await sims.run_state(sim.id)
    if state is not None:
        live = _(" · environment open for interviews") if state.live and state.status == "idle" else ""
        lines.append(_("run: {state}", state=state.describe()) + live)
        if rounds := await sims.fork_rounds(sim.id):
            lines.append(_("can be forked after rounds {rounds}: /sim fork {sim} --from-round K",
                           rounds=describe_rounds(rounds), sim=sim.id))
    if (beliefs := await sims.beliefs_line(sim.id)) is not None:
        lines.append(beliefs)
    if (recorded := await sims.outcome(sim.id)) is not None:
        score = (f"scored {recorded.scoring.score}/{recorded.scoring.scale}" if recorded.scoring is not None
                 else "being scored")
        lines.append(f"outcome: {clip(recorded.outcome, 200)} · {score}")
    if injected := await sims.injections(sim):
        lines += [_("injected events:")] + [f"• {s.describe()}" for s in injected]
    if job is not None and job.state in ("interrupted", "failed", "cancelled", "stopped") and job.resumable:
        lines.append(_("/resume {job} continues from the first unfinished step.", job=job.id))
    return "\n".join(lines)


def setup(app, actions: SimActions) -> None:
    sims = simulations(app)

    async def status(ctx: CommandContext, sim: SimRecord) -> None:
        await ctx.reply.send(await status_text(sims, sim))

    actions.add(SimAction(N_("status"), N_("status"), status))
