"""The one scheduler of the process: the daily world merge and the per-channel daily digests.

APScheduler 3's AsyncIOScheduler runs on the bot's event loop (PTB's JobQueue is not used).
Digest subscriptions live in the database and are re-added at start-up. APScheduler only
knows about lateness while it runs (``misfire_grace_s``); runs missed while the process was
down are found from ``last_sent_at`` / ``schedule_runs`` and handled by ``[scheduler] missed``.

Several bot processes may share the database, each with its own scheduler. Every scheduled
run is claimed first, in one write transaction: the merge by moving ``schedule_runs.last_run``
past the time it was due, a digest by moving ``last_sent_at`` past its own. The process that
claims a run does it; the others find it claimed, so nothing runs twice.

A digest is written in its channel's language (App.language_of), the same for every process.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger

from engine.i18n import N_, _, using
from engine.jobs import state_name, utcnow
from engine.memory import Digest
from engine.memory.audience import PUBLIC, Viewer
from engine.sim.simulations import OUTCOME_SCALE
from engine.words import plural

if TYPE_CHECKING:
    from bot.app import App

log = logging.getLogger(__name__)

MERGE = "merge"


def parse_hhmm(value: str) -> tuple[int, int]:
    """'9:30' -> (9, 30); ValueError with a readable message otherwise."""
    try:
        hour, minute = (int(part) for part in value.strip().split(":"))
    except ValueError:
        raise ValueError(_("time must look like 18:30, not {value}", value=repr(value))) from None
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise ValueError(_("time must look like 18:30, not {value}", value=repr(value)))
    return hour, minute


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(_("unknown time zone {name} (use an IANA name like Europe/Berlin)", name=repr(name))) from None


def daily(time: str, tz: str) -> CronTrigger:
    hour, minute = parse_hhmm(time)
    return CronTrigger(hour=hour, minute=minute, timezone=zone(tz))


def previous_fire(time: str, tz: str, now: datetime) -> datetime:
    """The most recent moment at or before ``now`` when a daily ``time`` in ``tz`` fell."""
    hour, minute = parse_hhmm(time)
    local = now.astimezone(zone(tz))
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate > local:
        candidate = (local - timedelta(days=1)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return candidate.astimezone(timezone.utc)


@dataclass
class Subscription:
    scope: str
    channel: str
    time: str
    timezone: str
    last_sent_at: str | None = None

    @property
    def job_id(self) -> str:
        return f"digest:{self.scope}:{self.channel}"


class Scheduler:
    def __init__(self, app: "App"):
        self.app = app
        cfg = app.config.scheduler
        self.cfg = cfg
        self.sched = AsyncIOScheduler(timezone=zone(cfg.timezone), job_defaults={
            "misfire_grace_time": cfg.misfire_grace_s, "coalesce": True, "max_instances": 1})

    # -- life cycle ------------------------------------------------------------------

    async def start(self, now: datetime | None = None) -> None:
        """Restore subscriptions, catch up on a missed merge (per policy) and start firing."""
        self.sched.start()
        self.sched.add_job(self.merge_worlds, daily(self.cfg.merge_time, self.cfg.timezone), id=MERGE,
                           replace_existing=True)
        for sub in await self.subscriptions():
            self._schedule(sub)
        if self.cfg.missed == "run_once":
            last = await self.app.db.fetchval("SELECT last_run FROM schedule_runs WHERE name=?", (MERGE,))
            due = previous_fire(self.cfg.merge_time, self.cfg.timezone, now or datetime.now(timezone.utc))
            if last and datetime.fromisoformat(last) < due:
                log.info("running the world merge missed while the bot was down")
                await self.merge_worlds(now)

    async def catch_up(self, platform: str, now: datetime | None = None) -> None:
        """Once ``platform`` is connected: post the digests it missed while the bot was down."""
        if self.cfg.missed != "run_once":
            return
        now = now or datetime.now(timezone.utc)
        for sub in await self.subscriptions():
            if sub.scope.split(":", 1)[0] != platform or not sub.last_sent_at:
                continue
            due = previous_fire(sub.time, sub.timezone, now)
            if datetime.fromisoformat(sub.last_sent_at) < due:
                log.info("posting the digest missed while the bot was down to %s/%s", sub.scope, sub.channel)
                await self.post_digest(sub.scope, sub.channel, due)

    def stop(self) -> None:
        if self.sched.running:
            self.sched.shutdown(wait=False)

    # -- subscriptions --------------------------------------------------------------

    async def subscriptions(self, scope: str | None = None) -> list[Subscription]:
        sql = "SELECT scope, channel, time, timezone, last_sent_at FROM digest_subscriptions"
        args: tuple[str, ...] = ()
        if scope is not None:
            sql, args = sql + " WHERE scope=?", (scope,)
        return [Subscription(*row) for row in await self.app.db.fetchall(sql + " ORDER BY scope, channel", args)]

    async def subscription(self, scope: str, channel: str) -> Subscription | None:
        row = await self.app.db.fetchone(
            "SELECT scope, channel, time, timezone, last_sent_at FROM digest_subscriptions"
            " WHERE scope=? AND channel=?", (scope, channel))
        return Subscription(*row) if row else None

    async def subscribe(self, scope: str, channel: str, time: str | None = None,
                        tz: str | None = None) -> Subscription:
        """Subscribe (or re-time) a channel; the first digest covers from now on."""
        old = await self.subscription(scope, channel)
        time = time or (old.time if old else self.cfg.digest_time)
        tz = tz or (old.timezone if old else self.cfg.timezone)
        hour, minute = parse_hhmm(time)
        zone(tz)
        sub = Subscription(scope, channel, f"{hour:02d}:{minute:02d}", tz,
                           old.last_sent_at if old else utcnow())
        await self.app.db.execute(
            "INSERT INTO digest_subscriptions(scope, channel, time, timezone, created_at, last_sent_at)"
            " VALUES (?,?,?,?,?,?) ON CONFLICT(scope, channel) DO UPDATE SET"
            " time=excluded.time, timezone=excluded.timezone",
            (scope, channel, sub.time, sub.timezone, utcnow(), sub.last_sent_at))
        self._schedule(sub)
        return sub

    async def unsubscribe(self, scope: str, channel: str) -> bool:
        sub = await self.subscription(scope, channel)
        if sub is None:
            return False
        await self.app.db.execute("DELETE FROM digest_subscriptions WHERE scope=? AND channel=?", (scope, channel))
        if self.sched.get_job(sub.job_id):
            self.sched.remove_job(sub.job_id)
        return True

    def _schedule(self, sub: Subscription) -> None:
        self.sched.add_job(self._fire_digest, daily(sub.time, sub.timezone), args=(sub.scope, sub.channel),
                           id=sub.job_id, replace_existing=True)

    async def _fire_digest(self, scope: str, channel: str) -> None:
        sub = await self.subscription(scope, channel)
        if sub is not None:
            due = previous_fire(sub.time, sub.timezone, datetime.now(timezone.utc))
            await self.post_digest(scope, channel, due)

    def next_run(self, scope: str, channel: str) -> datetime | None:
        job = self.sched.get_job(f"digest:{scope}:{channel}")
        return job.next_run_time if job else None

    # -- the work ---------------------------------------------------------------------

    async def merge_worlds(self, now: datetime | None = None) -> bool:
        """The daily world merge due at or before ``now``, unless a process sharing the database
        has already run it; True when this call ran it. A failed merge gives its claim back, so
        the next start-up catches up on it."""
        due = previous_fire(self.cfg.merge_time, self.cfg.timezone, now or datetime.now(timezone.utc))
        claimed, previous = await claim_daily_run(self.app.db, MERGE, due)
        if not claimed:
            log.info("the world merge due at %s has already run", due.isoformat())
            return False
        if self.app.remembers:
            try:
                await self.app.memory.maintain()
            except Exception:
                log.exception("daily world merge failed")
                await unclaim_daily_run(self.app.db, MERGE, previous)
                return False
        return True

    async def post_digest(self, scope: str, channel: str, due: datetime | None = None) -> bool:
        """Post the digest into one channel; True when it was posted. A scheduled digest passes
        the time it was ``due``: it is posted only if no process sharing the database has sent
        this channel's digest since then."""
        reply = self.app.reply_to(scope, channel)
        if reply is None:
            log.info("no adapter for %s is running; digest for %s kept for later", scope, channel)
            return False
        # Mark it sent before posting: a failed post is lost once, never posted twice.
        since = await claim_digest(self.app.db, scope, channel, due)
        if since is None:
            log.info("the digest for %s/%s due at %s was already sent", scope, channel, due)
            return False
        with using(await self.app.language_of(scope, channel)):
            text = await build_digest(self.app, scope, since, channel)
        try:
            await reply.send(text)
        except Exception:
            log.exception("could not post the digest to %s/%s", scope, channel)
            return False
        return True


async def claim_daily_run(db, name: str, due: datetime) -> tuple[bool, str | None]:
    """Claim the run of ``name`` due at ``due``: (True, the previous ``last_run``) when no
    process has run it since, recording it as run now; (False, None) when one has."""
    async with db.transaction() as conn:
        async with conn.execute("SELECT last_run FROM schedule_runs WHERE name=?", (name,)) as cur:
            row = await cur.fetchone()
        last = row[0] if row else None
        if last and datetime.fromisoformat(last) >= due:
            return False, None
        await conn.execute("INSERT INTO schedule_runs(name, last_run) VALUES (?, ?)"
                           " ON CONFLICT(name) DO UPDATE SET last_run=excluded.last_run", (name, utcnow()))
        return True, last


async def unclaim_daily_run(db, name: str, previous: str | None) -> None:
    """Give a claim back (the run failed): ``last_run`` is what it was before."""
    if previous is None:
        await db.execute("DELETE FROM schedule_runs WHERE name=?", (name,))
    else:
        await db.execute("UPDATE schedule_runs SET last_run=? WHERE name=?", (previous, name))


async def claim_digest(db, scope: str, channel: str, due: datetime | None) -> str | None:
    """Claim a digest of one channel: the time it covers from, with the subscription marked sent
    now; None when it is ``due`` but some process has sent it since. A channel without a
    subscription (a one-off /digest now) covers the last day and marks nothing."""
    now = datetime.now(timezone.utc)
    async with db.transaction() as conn:
        async with conn.execute("SELECT last_sent_at FROM digest_subscriptions WHERE scope=? AND channel=?",
                                (scope, channel)) as cur:
            row = await cur.fetchone()
        if row is None:
            return (now - timedelta(days=1)).isoformat(timespec="seconds")
        last = row[0]
        if due is not None and last and datetime.fromisoformat(last) >= due:
            return None
        # sub-second: the next digest covers from just after this one
        await conn.execute("UPDATE digest_subscriptions SET last_sent_at=? WHERE scope=? AND channel=?",
                           (now.isoformat(), scope, channel))
        return last or (now - timedelta(days=1)).isoformat(timespec="seconds")


def _where(topic: str) -> str:
    return _(" — in {topic}", topic=topic) if topic else ""


# The memory digest's sections (engine.memory.digest), in the order shown, with how one entry reads
# (the headings are msgids).
MEMORY_SECTIONS: list[tuple[str, str, Callable[..., str]]] = [
    ("new_worlds", N_("New worlds"), lambda w: f"{w.topic} (" + plural(w.added, "{n} message", "{n} messages") + ")"),
    ("grown_worlds", N_("Grown worlds"),
     lambda w: f"{w.topic} (+" + plural(w.added, "{n} message", "{n} messages") + ")"),
    ("new_beliefs", N_("New beliefs"), lambda b: f"{b.text}{_where(b.topic)}"),
    ("superseded_beliefs", N_("Superseded beliefs"), lambda b: f"{b.old} → {b.new}{_where(b.topic)}"),
    ("merges", N_("Merged worlds"), lambda m: _("{absorbed} joined {kept}",   # no name once /forget ran
                                                absorbed=m.absorbed_topic or _("A world"),
                                                kept=m.kept_topic or _("a near-identical world"))),
]
MAX_ITEMS = 15


def _memory_lines(digest: Digest) -> list[str]:
    lines: list[str] = []
    for key, heading, fmt in MEMORY_SECTIONS:
        items = getattr(digest, key)
        if not items:
            continue
        lines.append(f"\n{_(heading)}:")
        lines += [f"• {fmt(item)}" for item in items[:MAX_ITEMS]]
        if len(items) > MAX_ITEMS:
            lines.append(_("• … and {n} more", n=len(items) - MAX_ITEMS))
    return lines


def _report_link(job) -> str:
    result = job.result or {}
    if "report" in result.get("steps", {}):   # written by the pipeline's report step: /report posts it
        return _(" — report: {where}", where=f"/report {result['sim_id']}")
    for key in ("report_url", "report_path", "report"):
        if isinstance(result.get(key), str):
            return _(" — report: {where}", where=result[key])
    return _(" — files: {folder}", folder=result["folder"]) if isinstance(result.get("folder"), str) else ""


async def build_digest(app: "App", scope: str, since: str, channel: str = "") -> str:
    """Memory changes (from the memory service), simulations started or finished and forecasts scored
    (/sim outcome) since ``since``, limited to what the audience of ``channel`` can read (no channel:
    what every member can read), in the current language."""
    lines = [_("📰 Daily digest (since {since} UTC)", since=since[:16].replace("T", " "))]
    memory = app.memory if app.remembers else None
    viewer = Viewer(scope, await memory.audience_of(scope, channel) if memory is not None else PUBLIC)
    if memory is not None:
        try:
            lines += _memory_lines(await memory.digest(viewer, datetime.fromisoformat(since)))
        except Exception:
            log.exception("memory digest failed for %s", scope)
    started, finished = [], []
    for job in await app.jobs.changed_since(scope, "simulation", since):
        if not await app.sees_job(viewer, job):
            continue  # started in a channel this one's audience cannot read
        if job.finished_at and job.finished_at >= since:
            finished.append(f"• {job.title} (`{job.id}`) {state_name(job.state)}{_report_link(job)}")
        elif job.created_at >= since:
            started.append(f"• {job.title} (`{job.id}`) {state_name(job.state)}")
    if started:
        lines += ["\n" + _("Simulations started:"), *started]
    if finished:
        lines += ["\n" + _("Simulations finished:"), *finished]
    if app.sims is not None and (scored := await app.sims.scored_since(viewer, since)):
        lines += ["\n" + _("Forecasts scored against what happened:")]
        lines += [f"• `{sim_id}` {requirement if len(requirement) <= 80 else requirement[:79] + '…'}: "
                  f"{score:g}/{OUTCOME_SCALE} (/sim status {sim_id})" for sim_id, requirement, score in scored]
    if len(lines) == 1:
        lines.append(_("Nothing new today."))
    return "\n".join(lines)
