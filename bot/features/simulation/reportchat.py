"""Questions to a simulation's report agent: ``/report <sim> ask <question>`` (bot/features/simulation/
report.py hands the ask over), and on Discord and Telegram a plain reply to one of the bot's report
messages (the summary, a chart, the file, an earlier answer), which stands for that command
(``App.reply_routes``).

The handler checks what can be said at once (no question, too long, no report yet, no LLM), then
asks the simulation service (``Simulations.ask_report``: engine/sim/report/chat.py) while the
platform shows that the bot is typing and with the short retries of a person waiting. The answer
is posted with its unverified citations flagged, and its message id is kept so that a reply to it
asks a follow-up. A budget reached is one line, with no LLM request sent.
"""
from __future__ import annotations

import dataclasses

from bot.commands.registry import CommandContext, UsageError
from bot.features.simulation.access import simulations
from bot.neutral import Incoming
from engine.llm import BudgetExceeded
from engine.llm.client import person_waiting
from engine.sim.records import SimRecord
from engine.sim.report.chat import QUESTION_MAX_CHARS, ReportAnswer, report_exists


def answer_text(sim_id: str, answer: ReportAnswer) -> str:
    text = f"💬 Report agent of `{sim_id}`:\n{answer.text}"
    if answer.unverified:
        text += (f"\n⚠ Unverified: {', '.join(answer.unverified)} (returned by no tool and not among the "
                 "report's sources)")
    return text


async def ask(ctx: CommandContext, sim: SimRecord) -> None:
    """``/report <sim> ask <question>`` for a simulation of this scope."""
    sims = simulations(ctx.app)
    question = (ctx.args.get("question") or "").strip()
    if not question:
        raise UsageError(f"ask what? Usage: /report {sim.id} ask <question…>")
    if len(question) > QUESTION_MAX_CHARS:
        raise UsageError(f"the question is {len(question):,} characters long; ask in at most "
                         f"{QUESTION_MAX_CHARS:,}.")
    if not report_exists(sim.folder):
        raise UsageError(f"simulation {sim.id} has no report yet: /report {sim.id} writes it; ask once it is posted.")
    if sims.llm is None:
        raise UsageError("questions to the report agent need an LLM: set [llm] base_url in config.toml")
    msg = ctx.message
    try:
        async with ctx.reply.typing():
            with person_waiting():
                answer = await sims.ask_report(sim, question, scope=ctx.scope, channel=msg.channel,
                                               asked_by=f"{msg.platform}:{msg.author_id}")
    except BudgetExceeded as err:
        await ctx.reply.error(f"no answer about `{sim.id}`: {err}")
        return
    sent = await ctx.reply.send(answer_text(sim.id, answer))
    await sims.note_report_messages(sim.id, ctx.scope, msg.channel, [sent.message_id])


def setup(app) -> None:
    sims = simulations(app)

    async def reply_to_report(msg: Incoming) -> Incoming | None:
        sim_id = await sims.report_of_message(msg.scope, msg.reply_to)
        if sim_id is None or not msg.text.strip():
            return None
        return dataclasses.replace(msg, command="report",
                                   options={"sim": sim_id, "action": "ask", "question": msg.text.strip()})

    app.reply_routes.append(reply_to_report)
