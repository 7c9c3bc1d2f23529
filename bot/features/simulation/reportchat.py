"""Questions to a simulation's report agent: ``/report <sim> ask <question>`` (bot/features/simulation/
report.py hands the ask over), and on Discord and Telegram a plain reply to one of the bot's report
messages (the summary, a chart, the file, an earlier answer), which stands for that command
(``App.reply_routes``).

The handler checks what can be said at once (no question, too long, no report yet, no LLM), then
asks the simulation service (``Simulations.ask_report``: engine/sim/report/chat.py) while the
platform shows that the bot is typing and with the short retries of a person waiting. The answer
is posted with its unverified citations flagged, and its message id is kept so that a reply to it
asks a follow-up. A budget reached is one line, with no LLM request sent. The report agent
interviews agents only for someone /interview allows (the simulation's starter or an
administrator), and at most ``[report] chat_max_interviewed`` of them per question.
"""
from __future__ import annotations

import dataclasses

from bot.app import Forgotten
from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import simulations
from bot.features.simulation.interview import may_interview
from bot.neutral import Incoming
from engine.i18n import _
from engine.llm import BudgetExceeded
from engine.llm.client import person_waiting
from engine.sim.simulations import QUESTION_MAX_CHARS, ReportAnswer, SimRecord, report_exists
from engine.words import plural


def asker(platform: str, author_id: str) -> str:
    """Who asked a question, as report chat keeps it."""
    return f"{platform}:{author_id}"


def answer_text(sim_id: str, answer: ReportAnswer) -> str:
    text = _("💬 Report agent of `{sim}`:", sim=sim_id) + f"\n{answer.text}"
    if answer.unverified:
        text += "\n" + _("⚠ Unverified: {cited} (returned by no tool and not among the report's sources)",
                         cited=", ".join(answer.unverified))
    return text


async def ask(ctx: CommandContext, sim: SimRecord) -> None:
    """``/report <sim> ask <question>`` for a simulation of this scope."""
    sims = simulations(ctx.app)
    question = (ctx.args.get("question") or "").strip()
    if not question:
        raise UsageError(_("ask what? Usage: /report {sim} ask <question…>", sim=sim.id))
    if len(question) > QUESTION_MAX_CHARS:
        raise UsageError(_("the question is {n} characters long; ask in at most {most}.", n=f"{len(question):,}",
                           most=f"{QUESTION_MAX_CHARS:,}"))
    if not report_exists(sim.folder):
        raise UsageError(_("simulation {sim} has no report yet: /report {sim} writes it; ask once it is posted.",
                           sim=sim.id))
    if sims.llm is None:
        raise UsageError(_("questions to the report agent need an LLM: set [llm] base_url in config.toml"))
    msg = ctx.message
    try:
        async with ctx.reply.typing():
            with person_waiting():
                answer = await sims.ask_report(sim, question, scope=ctx.scope, channel=msg.channel,
                                               asked_by=asker(msg.platform, msg.author_id),
                                               may_interview=await may_interview(ctx, sim.id))
    except BudgetExceeded as err:
        await ctx.reply.error(_("no answer about `{sim}`: {error}", sim=sim.id, error=err))
        return
    sent = await ctx.reply.send(answer_text(sim.id, answer))
    await sims.note_report_messages(sim.id, ctx.scope, msg.channel, [sent.message_id])


def setup(app) -> None:
    sims = simulations(app)

    async def reply_to_report(msg: Incoming) -> Incoming | None:
        # a report this channel may not see is as if unknown: the reply stays a plain message
        sim_id = await sims.report_of_message(msg.viewer, msg.reply_to)
        if sim_id is None or not msg.text.strip():
            return None
        return dataclasses.replace(msg, command="report",
                                   options={"sim": sim_id, "action": "ask", "question": msg.text.strip()})

    app.reply_routes.append(reply_to_report)

    async def forget(what: Forgotten) -> str | None:
        """/forget: the questions (and answers) asked here, in that channel, by that person, or the one
        a forgotten message asked (a reply to a report is remembered as a message too)."""
        platform = what.scope.split(":", 1)[0]
        gone = await sims.forget_report_chat(what.scope, what.channel,
                                             asker(platform, what.author_id) if what.author_id is not None else None,
                                             what.said.strip() if what.said is not None else None)
        everything = what.channel is None and what.author_id is None and what.said is None
        kept = len(await sims.listing(what.viewer, limit=10_000)) if everything else 0
        notes = [plural(gone, "Also removed: {n} question to report agents, with its answer.",
                        "Also removed: {n} questions to report agents, with the answers.")] if gone else []
        if kept:
            notes.append(plural(kept, "Kept: {n} simulation started here, with its documents, runs and reports "
                                "(/sims lists them).", "Kept: {n} simulations started here, with their documents, "
                                "runs and reports (/sims lists them)."))
        return " ".join(notes) or None

    app.on_forget.append(forget)
