"""Show a job's progress in the chat: one message, edited at a throttled rate, then a final note."""
from __future__ import annotations

import asyncio
import logging
import time

from bot.neutral import Reply, Sent
from engine.jobs import DONE, Job

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
    reason = job.error or job.message or job.state
    return f"❌ {job.title} (`{job.id}`) {job.state}: {reason}"


async def follow_job(app, job: Job, reply: Reply, interval: float | None = None) -> None:
    """Post a progress message for ``job`` and keep it current until the job ends."""
    interval = app.config.jobs.progress_interval_s if interval is None else interval
    last_text = progress_text(job)  # ``job`` is the live object: it may change while we post
    try:
        sent: Sent = await reply.progress_message(last_text)
    except Exception:
        log.warning("could not post a progress message for job %s", job.id, exc_info=True)
        return
    last_at = time.monotonic()
    pending: Job | None = None
    events = app.jobs.watch(job.id)
    first = asyncio.ensure_future(anext(events, None))  # subscribes before we look at the job again
    await asyncio.sleep(0)
    # Progress reported while the first message was being posted would otherwise be missed.
    current = await app.jobs.get(job.id)
    if current is not None and not current.finished and progress_text(current) != last_text:
        last_text = progress_text(current)
        try:
            await sent.edit(last_text)
        except Exception:
            log.warning("could not edit progress message", exc_info=True)

    async def rest():
        event = await first
        if event is not None:
            yield event
            async for event in events:
                yield event

    async for event in rest():
        pending = event.job
        if time.monotonic() - last_at < interval:
            continue
        text = progress_text(pending)
        if text != last_text:
            try:
                await sent.edit(text)
            except Exception:
                log.warning("could not edit progress message", exc_info=True)
            last_text, last_at, pending = text, time.monotonic(), None
    final = await app.jobs.get(job.id)
    if final is None:
        return
    try:
        await sent.edit(final_text(final))
    except Exception:
        log.warning("could not edit progress message", exc_info=True)
    await reply.send(final_text(final))


def start_following(app, job: Job, reply: Reply) -> asyncio.Task:
    task = asyncio.create_task(follow_job(app, job, reply), name=f"follow-{job.id}")
    app.background.add(task)
    task.add_done_callback(app.background.discard)
    return task
