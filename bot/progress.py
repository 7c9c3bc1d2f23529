"""Show a job's progress in the chat: one message, edited at a throttled rate, then a final note."""
from __future__ import annotations

import asyncio
import logging
import time

from bot.neutral import Reply, Sent
from engine.jobs import DONE, STOPPED, Job

log = logging.getLogger(__name__)


def progress_text(job: Job) -> str:
    bar = ""
    if job.progress is not None:
        filled = int(job.progress * 10)
        bar = f" [{'█' * filled}{'░' * (10 - filled)}] {job.progress * 100:.0f}%"
    return f"⏳ {job.title} (`{job.id}`) {job.state}{bar}\n{job.message}".strip()


def final_text(job: Job) -> str:
    if job.state == DONE:
        return f"✅ {job.title} (`{job.id}`) finished. {job.message}".strip()
    if job.state == STOPPED:  # ended as asked: the message says where and how to go on
        return f"⏹ {job.title} (`{job.id}`) {job.message or 'stopped'}"
    reason = job.error or job.message or job.state
    return f"❌ {job.title} (`{job.id}`) {job.state}: {reason}"


async def follow_job(app, job: Job, reply: Reply, interval: float | None = None) -> None:
    """Post a progress message for ``job`` and keep it current until the job ends.

    Edits are at least ``interval`` apart; progress held back by that throttle is shown once
    the interval has passed, even when the job reports nothing more for a long while.
    """
    interval = app.config.jobs.progress_interval_s if interval is None else interval
    last_text = progress_text(job)  # ``job`` is the live object: it may change while we post
    try:
        sent: Sent = await reply.progress_message(last_text)
    except Exception:
        log.warning("could not post a progress message for job %s", job.id, exc_info=True)
        return
    last_at = time.monotonic()

    async def edit(text: str) -> None:
        nonlocal last_text, last_at
        if text == last_text:  # Telegram refuses identical edits; others waste a request
            return
        try:
            await sent.edit(text)
        except Exception:
            log.warning("could not edit progress message", exc_info=True)
        last_text, last_at = text, time.monotonic()

    events = app.jobs.watch(job.id)
    upcoming = asyncio.ensure_future(anext(events, None))  # subscribes before we look at the job again
    try:
        await asyncio.sleep(0)
        # Progress reported while the first message was being posted would otherwise be missed.
        # The live object, not the database: a read racing the runner's write could show the
        # job a state behind (queued after running).
        if not job.finished:
            await edit(progress_text(job))
        pending: Job | None = None
        while True:
            wait = None if pending is None else max(0.0, interval - (time.monotonic() - last_at))
            done, _ = await asyncio.wait({upcoming}, timeout=wait)
            if not done:  # the throttle held this back and nothing newer came: show it now
                await edit(progress_text(pending))
                pending = None
                continue
            event = upcoming.result()
            if event is None:
                break
            upcoming = asyncio.ensure_future(anext(events, None))
            pending = event.job
            if time.monotonic() - last_at >= interval:
                await edit(progress_text(pending))
                pending = None
    finally:
        upcoming.cancel()
    final = await app.jobs.get(job.id)
    if final is None:
        return
    await edit(final_text(final))
    await reply.send(final_text(final))


def start_following(app, job: Job, reply: Reply) -> asyncio.Task:
    task = asyncio.create_task(follow_job(app, job, reply), name=f"follow-{job.id}")
    app.background.add(task)
    task.add_done_callback(app.background.discard)
    return task
