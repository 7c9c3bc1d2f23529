"""A job's life in its channel: one progress message, edited at a throttled rate, a final note,
then, for a job that is done, its result, posted by what its kind registered in
``App.result_posters`` (a report's summary, charts and file). This is the one way a finished
job's result reaches the chat. All of it is written in the language the job was started in
(``Job.language``)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from bot.neutral import Reply, Sent
from bot.public import job_error
from engine.i18n import _, using
from engine.jobs import DONE, STOPPED, Job, state_name

log = logging.getLogger(__name__)

# (the finished job, a Reply into its channel) -> posts what the job made
ResultPoster = Callable[[Job, Reply], Awaitable[None]]


def progress_text(job: Job) -> str:
    bar = ""
    if job.progress is not None:
        filled = int(job.progress * 10)
        bar = f" [{'█' * filled}{'░' * (10 - filled)}] {job.progress * 100:.0f}%"
    return f"⏳ {job.title} (`{job.id}`) {state_name(job.state)}{bar}\n{job.message}".strip()


def final_text(job: Job) -> str:
    if job.state == DONE:
        return _("✅ {title} (`{job}`) finished. {message}", title=job.title, job=job.id, message=job.message).strip()
    if job.state == STOPPED:  # ended as asked: the message says where and how to go on
        return f"⏹ {job.title} (`{job.id}`) {job.message or state_name(job.state)}"
    reason = job_error(job) or job.message or state_name(job.state)
    return f"❌ {job.title} (`{job.id}`) {state_name(job.state)}: {reason}"


async def follow_job(app, job: Job, reply: Reply, interval: float | None = None) -> None:
    """Post a progress message for ``job`` and keep it current until the job ends; then the final
    note and, when the job is done, its result (``post_result``).

    Edits are at least ``interval`` apart; progress held back by that throttle is shown once
    the interval has passed, even when the job reports nothing more for a long while. When the
    progress message cannot be posted, the job is still followed (without notes) for its result.
    """
    with using(job.language):
        await _follow(app, job, reply, interval)


async def _follow(app, job: Job, reply: Reply, interval: float | None) -> None:
    interval = app.config.jobs.progress_interval_s if interval is None else interval
    last_text = progress_text(job)  # ``job`` is the live object: it may change while we post
    sent: Sent | None
    try:
        sent = await reply.progress_message(last_text)
    except Exception:
        log.warning("could not post a progress message for job %s", job.id, exc_info=True)
        sent = None
    last_at = time.monotonic()

    async def edit(text: str) -> None:
        nonlocal last_text, last_at
        if sent is None or text == last_text:  # Telegram refuses identical edits; others waste a request
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
                assert pending is not None  # only a state held back sets a timeout
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
    if sent is not None:
        await edit(final_text(final))
        await reply.send(final_text(final))
    await post_result(app, final, reply)


async def post_result(app, job: Job, reply: Reply) -> None:
    """Post what a done job made with the poster its kind registered (``App.result_posters``); a
    failure is logged (the job itself is done)."""
    poster = app.result_posters.get(job.kind)
    if job.state != DONE or poster is None:
        return
    try:
        await poster(job, reply)
    except Exception:
        log.exception("could not post the result of job %s", job.id)


def start_following(app, job: Job, reply: Reply) -> asyncio.Task:
    task = asyncio.create_task(follow_job(app, job, reply), name=f"follow-{job.id}")
    app.background.add(task)
    task.add_done_callback(app.background.discard)
    return task
