"""The scheduler: daily triggers in time zones, stored subscriptions, missed runs, digest posts."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bot.neutral import Reply, Sent
from bot.scheduler import build_digest, daily, previous_fire
from tests.helpers.chat import Outlet, make_app
from tests.helpers.memory import Chat

pytestmark = pytest.mark.timeout(60)


class Posted(Sent):
    async def edit(self, text: str) -> None:
        pass


class Recorder(Reply):
    """An outlet that keeps what was posted, per (scope, channel)."""
    posts: dict[tuple[str, str], list[str]] = {}

    def __init__(self, scope, channel):
        self.key = (scope, channel)

    async def _send_one(self, text: str) -> Sent:
        self.posts.setdefault(self.key, []).append(text)
        return Posted()

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        return await self._send_one(f"[file] {path}")


@pytest.fixture
def posts():
    Recorder.posts = {}
    return Recorder.posts


async def started_app(tmp_path, db_url: str | None = None, **scheduler):
    """A started app with a recording outlet, on ``db_url`` (default: SQLite in ``tmp_path``)."""
    app = await make_app(tmp_path, db_url, scheduler=scheduler)
    app.adapters.add(Outlet("test", Recorder))
    await app.start()
    return app


def test_daily_triggers_follow_the_time_zone_across_daylight_saving():
    berlin = daily("09:00", "Europe/Berlin")
    before = datetime(2026, 3, 28, 12, 0, tzinfo=timezone.utc)  # CET, UTC+1
    after = datetime(2026, 3, 29, 12, 0, tzinfo=timezone.utc)   # CEST from 29 March, UTC+2
    assert berlin.get_next_fire_time(None, before).astimezone(timezone.utc) == datetime(
        2026, 3, 29, 7, 0, tzinfo=timezone.utc)
    assert berlin.get_next_fire_time(None, after).astimezone(timezone.utc) == datetime(
        2026, 3, 30, 7, 0, tzinfo=timezone.utc)
    assert previous_fire("09:00", "Europe/Berlin", before) == datetime(2026, 3, 28, 8, 0, tzinfo=timezone.utc)
    assert previous_fire("23:30", "America/New_York", after) == datetime(2026, 3, 29, 3, 30, tzinfo=timezone.utc)


async def test_subscriptions_get_the_right_next_run_and_survive_a_restart(tmp_path, posts):
    app = await started_app(tmp_path)
    sched = app.scheduler
    sub = await sched.subscribe("test:a", "1", "18:30", "Asia/Tokyo")
    nxt = sched.next_run("test:a", "1")
    now = datetime.now(timezone.utc)
    assert nxt.astimezone(timezone.utc) > now and nxt - now <= timedelta(days=1)
    assert (nxt.hour, nxt.minute, str(nxt.tzinfo)) == (18, 30, "Asia/Tokyo") and sub.time == "18:30"
    with pytest.raises(ValueError, match="time zone"):
        await sched.subscribe("test:a", "2", "10:00", "Mars/Olympus")
    await app.close()

    app = await started_app(tmp_path)
    sched = app.scheduler
    assert sched.next_run("test:a", "1") == nxt
    assert [(s.scope, s.channel) for s in await sched.subscriptions()] == [("test:a", "1")]
    await sched.unsubscribe("test:a", "1")
    assert sched.next_run("test:a", "1") is None
    await app.close()


async def test_a_forced_fire_posts_the_digest_to_its_channel_only(tmp_path, posts):
    app = await started_app(tmp_path)
    sched = app.scheduler

    async def finished_sim(ctx):
        return {"report_path": "/data/sims/abc/report.md"}
    app.jobs.register("simulation", finished_sim)
    for scope, channel in (("test:a", "1"), ("test:a", "2"), ("test:b", "3")):
        await sched.subscribe(scope, channel, "03:00", "UTC")
    await app.db.execute("UPDATE digest_subscriptions SET last_sent_at='2000-01-01T00:00:00+00:00'")
    job_a = await app.jobs.submit("simulation", {}, "test:a", None, title="flood forecast")
    job_b = await app.jobs.submit("simulation", {}, "test:b", None, title="other server's sim")
    await app.jobs.wait(job_a.id), await app.jobs.wait(job_b.id)

    sched.sched.get_job("digest:test:a:1").modify(next_run_time=datetime.now(timezone.utc))
    for _ in range(100):
        if posts:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    assert list(posts) == [("test:a", "1")]
    digest = posts[("test:a", "1")][0]
    assert "flood forecast" in digest and "/data/sims/abc/report.md" in digest
    assert "other server" not in digest
    # the next digest covers only what happened since this one
    assert await sched.post_digest("test:a", "1")
    assert "flood forecast" not in posts[("test:a", "1")][1]
    await app.close()


async def test_the_digest_lists_what_memory_learned_by_topic(tmp_path):
    app = await started_app(tmp_path)
    memory = app.memory
    chat = Chat("test:a", "1")
    for text in ("the harbour strike starts on monday", "dock workers at the harbour vote on the strike",
                 "the harbour strike could last a week"):
        await memory.ingest(chat.msg(text))
    await memory.ingest(chat.msg("my sourdough bread did not rise in the oven"))
    (bread,) = [w for w in await memory.worlds("test:a") if w.evidence == 1]
    (harbour,) = [w for w in await memory.worlds("test:a") if w.evidence == 3]
    digest = await build_digest(app, "test:a", "2000-01-01T00:00:00+00:00", "1")
    assert f"New worlds:\n• {harbour.topic} (3 messages)\n• {bread.topic} (1 message)" in digest, digest
    await app.close()


@pytest.mark.parametrize("policy, expected", [("run_once", 1), ("skip", 0)])
async def test_digests_missed_during_downtime_follow_the_policy(tmp_path, posts, policy, expected):
    app = await started_app(tmp_path, missed=policy)
    sched = app.scheduler
    await sched.subscribe("test:a", "1", "08:00", "UTC")
    two_days_ago = (datetime.now(timezone.utc) - timedelta(days=2)).isoformat()
    await app.db.execute("UPDATE digest_subscriptions SET last_sent_at=?", (two_days_ago,))
    await app.platform_ready("test")
    await app.platform_ready("test")  # a reconnect must not post it again
    assert len(posts.get(("test:a", "1"), [])) == expected
    await app.close()


async def test_a_merge_missed_during_downtime_runs_once_at_start(tmp_path, posts, db_url):
    app = await started_app(tmp_path, db_url)
    old = (datetime.now(timezone.utc) - timedelta(days=3)).isoformat()
    await app.db.execute("INSERT INTO schedule_runs(name, last_run) VALUES ('merge', ?)", (old,))
    await app.close()
    app = await started_app(tmp_path, db_url)
    last = await app.db.fetchval("SELECT last_run FROM schedule_runs WHERE name='merge'")
    assert datetime.fromisoformat(last) > datetime.now(timezone.utc) - timedelta(minutes=1)
    assert app.scheduler.sched.get_job("merge").next_run_time is not None
    await app.close()


async def test_digest_command_in_the_console_shape(tmp_path, posts):
    from bot.adapters.console import ConsoleOut, ConsoleReply
    app = await started_app(tmp_path)
    lines = []

    class Out(ConsoleOut):
        def print(self, text, style=""):
            lines.append(text)
    reply = ConsoleReply(Out(False))
    from bot.neutral import Incoming
    msg = Incoming("test", "test:c", "9", "u", "u", "/digest on 07:15 Europe/Paris", is_admin=True)
    await app.dispatch(msg, reply)
    assert "07:15 Europe/Paris" in lines[-1]
    await app.dispatch(Incoming("test", "test:c", "9", "u", "u", "/digest now"), reply)
    assert posts[("test:c", "9")][0].startswith("📰 Daily digest")
    await app.dispatch(Incoming("test", "test:c", "9", "u", "u", "/digest off", is_admin=True), reply)
    assert lines[-1] == "Digest off." and not await app.scheduler.subscriptions("test:c")
    await app.close()


@pytest.fixture(scope="session")
def memory_embedder():
    from engine.embedder import Embedder
    return Embedder()


async def test_the_digest_reports_memory_changes_from_the_real_memory_engine(tmp_path, posts, memory_embedder):
    from engine.memory.engine import MemoryEngine
    from engine.memory.models import MemoryMessage

    app = await started_app(tmp_path)
    memory = MemoryEngine(app.db, memory_embedder, app.config.memory)
    await memory.start()
    app.memory = memory
    sched = app.scheduler
    await sched.subscribe("test:a", "1", "08:00", "UTC")
    await app.db.execute("UPDATE digest_subscriptions SET last_sent_at='2000-01-01T00:00:00+00:00'")
    for i, text in enumerate(["The river flooded the lower town last night.",
                              "Water levels in the river are still rising this morning."]):
        await memory.ingest(MemoryMessage("test:a", "1", f"m{i}", "ann", text))
    await memory.ingest(MemoryMessage("test:b", "3", "x1", "bob", "Our chess club meets on Thursdays."))
    assert await sched.post_digest("test:a", "1")
    digest = posts[("test:a", "1")][0]
    assert "New worlds:" in digest and "messages)" in digest
    assert "chess" not in digest.lower()
    await app.close()


async def test_two_processes_sharing_the_database_run_each_daily_merge_and_digest_once(tmp_path, posts, db_url):
    first = await started_app(tmp_path, db_url)
    await first.scheduler.subscribe("test:a", "1", "08:00", "UTC")
    await first.db.execute("UPDATE digest_subscriptions SET last_sent_at='2000-01-01T00:00:00+00:00'")
    second = await started_app(tmp_path, db_url)  # another bot process on the same database
    schedulers = [app.scheduler for app in (first, second)]
    assert all(s.next_run("test:a", "1") is not None for s in schedulers)  # both would fire it

    # both processes' triggers fire the same slot at once: what each trigger runs, concurrently
    ran = await asyncio.gather(*(s.merge_worlds() for s in schedulers))
    assert sorted(ran) == [False, True]
    assert not any(await asyncio.gather(*(s.merge_worlds() for s in schedulers)))  # done for today
    await asyncio.gather(*(s._fire_digest("test:a", "1") for s in schedulers))
    assert len(posts[("test:a", "1")]) == 1

    due = previous_fire("08:00", "UTC", datetime.now(timezone.utc))
    sent = await asyncio.gather(*(s.post_digest("test:a", "1", due) for s in schedulers))
    assert sent == [False, False] and len(posts[("test:a", "1")]) == 1  # that slot is sent
    for app in (first, second):
        await app.platform_ready("test")  # the catch-up after a (re)connect finds it sent too
    assert len(posts[("test:a", "1")]) == 1
    assert await schedulers[1].post_digest("test:a", "1")  # /digest now always posts
    await first.close()
    await second.close()
