"""Load on the real bot process through the Telegram Bot API fake: crashes and bursts.

The bot runs as `python -m bot run` in a subprocess whose config points Telegram at a
FakeTelegram served by this process; what memory stored is read from the bot's SQLite file.

* crash: ``--messages`` plain messages over ``--chats`` chats pushed at ``--crash-rate``/s,
  the bot killed with SIGKILL once Telegram has confirmed updates memory has not stored yet,
  then started again; counts messages lost and stored twice (``--trials`` times).
* burst: ``--rate`` messages/s for ``--seconds`` s over ``--chats`` chats: stored messages/s
  while they arrive, send -> stored latency p50/p99 (the row is present, so keyword-searchable;
  rows polled every 20 ms), send -> vector searchable (the row has its world, so its vector is in
  recall's index) p50/p99, how long after the last message sent every vector was searchable, and the answer
  time of a /jobs command sent every 2 s during the burst, alternately into a chat of the
  burst (it first waits for that chat's earlier messages) and into a quiet chat.
* capacity: ``--capacity`` messages pushed at once: how fast the bot stores them, between two
  measurements of how fast this machine embeds with no bot running (the ceiling).

``--models``: the burst and capacity runs once per embedding model, one after the other in
this run (each bot with that [embedder] model and its calibrated thresholds), each followed by
the bot's resident memory (VmHWM, its peak) before it stops. A message is stored first and
embedded after (engine/memory/pending.py): "stored" and "vector searchable" are timed apart. On
a version that stores a message with its vector the two coincide. Capacity counts stored rows.

    python -m bench.load [--only crash|burst|capacity] [--trials 3] [--models M ...] [--rate 100]
"""
from __future__ import annotations

import argparse
import asyncio
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.helpers.bot_process import kill_9, start_bot, stop, stored, telegram_config  # noqa: E402
from tests.helpers.wait import until  # noqa: E402

TOKEN = "123:LOAD"
POLL_S = 0.02


def routed(db_path: Path, after_id: int) -> list[tuple[str, str]]:
    """(channel, message_id) of the rows after ``after_id`` that have their world (and vector)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT channel, message_id FROM memory_messages WHERE id > ? AND world_id IS NOT NULL",
                            (after_id,)).fetchall()
    finally:
        conn.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


class Run:
    """One bot process (restartable) on one fake, in a fresh folder."""

    def __init__(self, folder: Path, server: FakeTelegram, model: str | None = None):
        self.folder, self.server = folder, server
        self.cfg = telegram_config(folder, server, sections={"embedder": {"model": model}} if model else None)
        self.peak_rss_mb = 0.0
        self.db = folder / "data" / "bot.sqlite3"
        self.proc: subprocess.Popen | None = None
        self.n = 0

    def measure_rss(self) -> None:
        """The bot process's peak resident memory so far (VmHWM)."""
        assert self.proc is not None  # started
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        self.peak_rss_mb = int(next(x for x in status.splitlines() if x.startswith("VmHWM")).split()[1]) / 1024

    async def start(self) -> None:
        calls = len(self.server.calls_of("setMyCommands"))
        self.proc = start_bot(self.cfg, self.server, self.folder / "bot.log")
        await until(lambda: len(self.server.calls_of("setMyCommands")) > calls, 120, "the bot to start",
                    self.proc)

    async def rows(self, after: int = 0):
        return await asyncio.to_thread(stored, self.db, after)

    def push(self, chat: int, label: str) -> tuple[str, int]:
        self.n += 1
        message = self.server.push_message(chat, f"{label} {self.n}: the ferry timetable changes on monday "
                                                 f"in chat {chat}")
        return str(chat), message["message_id"]

    async def warm(self, chats: list[int]) -> None:
        """Load the embedding model and every chat's state before measuring."""
        before = len(await self.rows())
        for chat in chats:
            self.push(chat, "warm-up")
        await until(lambda: len(stored(self.db)) >= before + len(chats), 120, "warm-up", self.proc)


async def crash_trial(messages: int, chats: int, rate: float) -> dict:
    server = await FakeTelegram(TOKEN).start()
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(Path(tmp), server)
        ids = [-1000 - i for i in range(chats)]
        try:
            await run.start()
            await run.warm(ids)
            warm = len(await run.rows())
            base = len(server.confirmed)
            sent = []
            killed_at: tuple[int, int, int] | None = None
            t0 = time.monotonic()
            for i in range(messages):
                await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
                sent.append(run.push(ids[i % chats], "crash"))
                if killed_at is None and i >= messages // 4:
                    in_memory = len(await run.rows()) - warm
                    if len(server.confirmed) - base - in_memory >= 50 or i >= messages // 2:
                        assert run.proc is not None  # started above
                        kill_9(run.proc)
                        killed_at = (i + 1, len(server.confirmed) - base, in_memory)
                        await run.start()
            await until(lambda: len(stored(run.db)) >= warm + messages, 300, "every message", run.proc)
            await asyncio.sleep(1.0)  # anything stored twice would show up by now
            rows = (await run.rows())[warm:]
        finally:
            if run.proc is not None:
                stop(run.proc)
        await server.stop()
    assert killed_at is not None  # the bot is killed a quarter of the way in
    got = [(channel, int(mid)) for _, channel, mid, _ in rows]
    lost = len(set(sent) - set(got))
    duplicated = len(got) - len(set(got))
    return {"sent": len(sent), "stored": len(got), "lost": lost, "duplicated": duplicated,
            "killed after sending": killed_at[0], "confirmed at kill": killed_at[1],
            "in memory at kill": killed_at[2]}


async def burst(rate: float, seconds: float, chats: int, model: str | None = None) -> dict:
    server = await FakeTelegram(TOKEN).start()
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(Path(tmp), server, model)
        ids = [-2000 - i for i in range(chats)]
        try:
            await run.start()
            await run.warm(ids)
            last_row = first_row = (await run.rows())[-1][0]
            sent_at: dict[tuple[str, int], float] = {}
            seen_at: dict[tuple[str, int], float] = {}
            routed_at: dict[tuple[str, int], float] = {}
            busy_s: list[float] = []    # /jobs in a chat of the burst: waits for its earlier messages
            quiet_s: list[float] = []   # /jobs in a chat with no messages
            done = asyncio.Event()

            async def watch() -> None:
                nonlocal last_row
                while not done.is_set() or len(routed_at) < len(sent_at):
                    for row_id, channel, mid, _ in await run.rows(last_row):
                        seen_at[(channel, int(mid))] = time.monotonic()
                        last_row = row_id
                    now = time.monotonic()
                    for channel, mid in await asyncio.to_thread(routed, run.db, first_row):
                        routed_at.setdefault((channel, int(mid)), now)
                    await asyncio.sleep(POLL_S)

            async def command(chat: int, latencies: list[float]) -> None:
                before = {id(c) for c in server.calls}
                asked = time.monotonic()
                server.push_message(chat, "/jobs")
                await server.wait_for("sendMessage", lambda c: id(c) not in before
                                      and int(c.params["chat_id"]) == chat, timeout=300)
                latencies.append(time.monotonic() - asked)

            watcher = asyncio.create_task(watch())
            commands: list[asyncio.Task] = []
            total = int(rate * seconds)
            t0 = time.monotonic()
            for i in range(total):
                await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
                key = run.push(ids[i % chats], "burst")
                sent_at[key] = time.monotonic()
                if i % int(rate * 2) == int(rate):  # a command every 2 s, mid-stream
                    k = len(commands)
                    commands.append(asyncio.create_task(
                        command(ids[k % chats], busy_s) if k % 2 == 0 else command(-2999 - k, quiet_s)))
            sending = time.monotonic() - t0
            in_time = sum(1 for k in sent_at if k in seen_at)
            routed_in_time = sum(1 for k in sent_at if k in routed_at)
            done.set()
            await asyncio.wait_for(watcher, 300)
            await asyncio.gather(*commands)
            end = max(seen_at.values())
            run.measure_rss()
        finally:
            if run.proc is not None:
                stop(run.proc)
        await server.stop()
    lags = [seen_at[k] - sent_at[k] for k in sent_at]
    vector_lags = [routed_at[k] - sent_at[k] for k in sent_at]
    return {"sent": total, "send rate": total / sending, "stored while sending": in_time,
            "stored msg/s overall": total / (end - t0), "lag p50 s": pct(lags, 0.5), "lag p99 s": pct(lags, 0.99),
            "lag max s": max(lags), "vector searchable while sending": routed_in_time,
            "vector lag p50 s": pct(vector_lags, 0.5), "vector lag p99 s": pct(vector_lags, 0.99),
            "every vector searchable s after the last send": max(routed_at.values()) - (t0 + sending),
            "commands in burst chats": len(busy_s), "their answer p50 s": pct(busy_s, 0.5),
            "max s": max(busy_s), "commands in quiet chats": len(quiet_s), "their answer p50 s ": pct(quiet_s, 0.5),
            "max s ": max(quiet_s), "bot peak RSS MB": run.peak_rss_mb}


async def capacity(messages: int, chats: int, model: str | None = None) -> dict:
    server = await FakeTelegram(TOKEN).start()
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(Path(tmp), server, model)
        ids = [-3000 - i for i in range(chats)]
        try:
            await run.start()
            await run.warm(ids)
            warm = len(await run.rows())
            t0 = time.monotonic()
            for i in range(messages):
                run.push(ids[i % chats], "capacity")
            first: tuple[float, int] | None = None
            while True:
                n = len(await run.rows()) - warm
                if n and first is None:
                    first = (time.monotonic(), n)
                if n >= messages:
                    break
                assert run.proc is not None and run.proc.poll() is None, "the bot died"
                await asyncio.sleep(POLL_S)
            end = time.monotonic()
            run.measure_rss()
        finally:
            if run.proc is not None:
                stop(run.proc)
        await server.stop()
    assert first is not None  # the loop ends once messages are stored
    return {"messages": messages, "seconds": end - t0, "msg/s": messages / (end - t0),
            "msg/s after the first batch": (messages - first[1]) / max(end - first[0], 1e-9),
            "bot peak RSS MB": run.peak_rss_mb}


def embedding_reference(n: int = 512, model: str | None = None) -> dict:
    """How fast this machine embeds right now, in this process, with no bot around: the ceiling
    the bot's stored msg/s is compared with (shared machines vary by the minute)."""
    from engine.embedder import Embedder
    embedder = Embedder(model) if model else Embedder()
    texts = [f"reference {i}: the ferry timetable changes on monday in chat {i % 10}" for i in range(n)]
    embedder.encode(texts[:32])
    t0 = time.monotonic()
    embedder.encode(texts)
    return {"messages": n, "msg/s": n / (time.monotonic() - t0)}


def show(name: str, result: dict) -> None:
    parts = [f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items()]
    print(f"{name}: " + ", ".join(parts), flush=True)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", choices=("crash", "burst", "capacity"))
    p.add_argument("--messages", type=int, default=2000)
    p.add_argument("--chats", type=int, default=10)
    p.add_argument("--crash-rate", type=float, default=200.0)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--capacity", type=int, default=4000)
    p.add_argument("--models", nargs="+", default=[None], help="embedding models, one after the other")
    args = p.parse_args()
    if args.only in (None, "crash"):
        for trial in range(args.trials):
            show(f"crash trial {trial + 1}", await crash_trial(args.messages, args.chats, args.crash_rate))
    for model in args.models:
        name = f" [{model}]" if model else ""
        if args.only in (None, "burst"):
            show(f"burst {args.rate:g} msg/s x {args.seconds:g} s{name}",
                 await burst(args.rate, args.seconds, args.chats, model))
        if args.only in (None, "capacity"):
            show(f"embedding alone (reference){name}", embedding_reference(model=model))
            show(f"capacity{name}", await capacity(args.capacity, args.chats, model))
            show(f"embedding alone (reference){name}", embedding_reference(model=model))


if __name__ == "__main__":
    asyncio.run(main())
