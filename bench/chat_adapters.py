"""Chat adapters through the real libraries against the local fakes: how fast answers go out.

Telegram: a burst of /help commands from many private chats, with the configured outgoing
limit (30 messages/s over all chats) and with the limit lifted, side by side. Discord: slash
command round trips (interaction -> deferred -> follow-up), one at a time and all at once.

    python bench/chat_adapters.py [--n 150]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.adapters import base  # noqa: E402
from bot.adapters.discord_adapter import DiscordAdapter  # noqa: E402
from bot.adapters.telegram_adapter import TelegramAdapter  # noqa: E402
from bot.app import App  # noqa: E402
from engine.config import parse_config  # noqa: E402
from tests.fakes.discord_server import FakeDiscord  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402


async def serve(app, adapter_class):
    stop = asyncio.Event()
    task = asyncio.create_task(base.serve(app.adapters.add(adapter_class(app)), stop))
    return stop, task


async def telegram_burst(n: int, rate: float) -> float:
    os.environ["BENCH_TG"] = "123:BENCH"
    server = await FakeTelegram("123:BENCH").start()
    with tempfile.TemporaryDirectory() as tmp:
        app = await App.create(parse_config({"bot": {"data_dir": tmp}, "telegram": {
            "token_env": "BENCH_TG", "base_url": server.base_url, "base_file_url": server.base_file_url,
            "poll_timeout_s": 1, "overall_max_rate": rate}}))
        await app.start()
        stop, task = await serve(app, TelegramAdapter)
        await server.wait_for("setMyCommands")
        start = time.perf_counter()
        for chat in range(1, n + 1):
            server.push_message(chat, "/jobs")
        deadline = time.monotonic() + 120
        while len(server.calls_of("sendMessage")) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - start
        stop.set()
        await task
        await app.close()
    await server.stop()
    return elapsed


async def discord_round_trips(n: int) -> tuple[list[float], float]:
    os.environ["BENCH_DC"] = "bench"
    server = await FakeDiscord().start()
    with tempfile.TemporaryDirectory() as tmp:
        app = await App.create(parse_config({"bot": {"data_dir": tmp}, "discord": {
            "token_env": "BENCH_DC", "api_base": server.api_base, "gateway_url": server.gateway_url}}))
        await app.start()
        stop, task = await serve(app, DiscordAdapter)
        while app.reply_to("discord:1", "1") is None:
            await asyncio.sleep(0.02)
        one = []
        for _ in range(n):
            before = len(server.calls_to("POST", "/webhooks/"))
            start = time.perf_counter()
            await server.interaction("jobs")
            while len(server.calls_to("POST", "/webhooks/")) == before:
                await asyncio.sleep(0.001)
            one.append(time.perf_counter() - start)
        before = len(server.calls_to("POST", "/webhooks/"))
        start = time.perf_counter()
        await asyncio.gather(*(server.interaction("jobs") for _ in range(n)))
        while len(server.calls_to("POST", "/webhooks/")) < before + n:
            await asyncio.sleep(0.001)
        burst = time.perf_counter() - start
        stop.set()
        await task
        await app.close()
    await server.stop()
    return one, burst


async def main(n: int) -> None:
    limited = await telegram_burst(n, 30.0)
    lifted = await telegram_burst(n, 100_000.0)
    print(f"telegram: {n} answers to {n} chats: {limited:.2f} s at the 30 msg/s limit "
          f"({n / limited:.0f} msg/s), {lifted:.2f} s with the limit lifted ({n / lifted:.0f} msg/s); "
          f"ratio {limited / lifted:.1f}x")
    one, burst = await discord_round_trips(n)
    print(f"discord: slash command round trip median {statistics.median(one) * 1000:.1f} ms, "
          f"p95 {sorted(one)[int(len(one) * 0.95) - 1] * 1000:.1f} ms (one at a time); "
          f"{n} at once answered in {burst:.2f} s ({n / burst:.0f}/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=150)
    asyncio.run(main(parser.parse_args().n))
