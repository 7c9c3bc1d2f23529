"""At most once: a command runs at most once per platform delivery, across restarts.

Telegram's inbox (bot/adapters/telegram_inbox.py) keeps an update until everything its batch
started has ended, and a restart hands the whole batch over again, so a command that had
already run (``/simulate``, ``/sim fork``, ``/sim inject``, ``/compare``, ``/report ask``) would
run a second time: a second simulation, fork or event. Plain messages stay at-least-once (memory
skips what it already holds); commands are made at-most-once here, for every command at once:

- Before a command does anything (its permission check, its downloads, its handler) the app
  marks its delivery STARTED, in its own committed transaction (``Delivery.begin``); when the
  command is over it marks it DONE. The side effects are spread over many services (a job, a
  simulation's folder, a file of events), so the mark cannot share their transactions; it is
  written first, which is what makes it at most once.
- Handed over again, a DONE command is skipped in silence: it ran and answered. A STARTED one
  was cut off by the crash, somewhere between its first step and its answer: it is not run again
  (what it did may already be done) and the chat is told so, once, with what to check.
- A question asked by replying to a report (``App.reply_routes``) keeps its own rule: it is a
  plain message, kept until answered, so one cut off before its answer is asked again; one
  answered (DONE) is not asked twice.

A message without a delivery (Discord's interactions, which Discord never redelivers, the
console) runs as it comes. Discord's backfill hands messages over ``from_history`` and the app
never runs them as commands.
"""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import AsyncIterator

from bot.neutral import Delivery, Incoming, Reply
from engine.i18n import _

log = logging.getLogger(__name__)


def interrupted_note(label: str) -> str:
    return _("{command} was cut off by a restart of the bot before it finished, and it is not run again, so that "
             "nothing is done twice. Check what it did (/jobs, /sims) and send it again if it is still needed.",
             command=label)


@asynccontextmanager
async def at_most_once(msg: Incoming, reply: Reply, label: str, again: bool = False) -> AsyncIterator[bool]:
    """Yields whether the command of ``msg`` should run now; marks it done when the block ends
    (not when it is cancelled: a shutdown cut it off). ``again``: one cut off by a restart runs
    again (a question to a report); by default it is only announced."""
    delivery = msg.delivery
    if delivery is None:
        yield True
        return
    earlier = await delivery.begin()
    if earlier == Delivery.DONE or (earlier == Delivery.STARTED and not again):
        log.info("%s of message %s in %s was handled before a restart: not run again", label, msg.message_id,
                 msg.scope)
        if earlier == Delivery.STARTED:
            await reply.error(interrupted_note(label))
            await delivery.end()
        yield False
        return
    try:
        yield True
    except asyncio.CancelledError:
        raise   # cut off: left STARTED, so the next start says so
    except BaseException:
        await delivery.end()
        raise
    await delivery.end()
