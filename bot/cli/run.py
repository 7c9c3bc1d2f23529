"""`run`: start every configured adapter in one process; the console when no chat token is set.

Every adapter is started the same way, through the ``Adapter`` interface (bot.adapters.base):
registered in the app, connected, run until the bot stops, then stopped. One chat adapter
failing (a bad token, the network) leaves the others running.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from typing import Any

from bot.adapters.base import Adapter, serve
from bot.app import App
from engine import allocator

log = logging.getLogger(__name__)

TRIM_EVERY_S = 60.0   # how often freed memory is handed back to the system (engine.allocator)

# Chat adapters besides the console, as 'module:Class'. Each starts only when configured.
ADAPTERS: list[str] = [
    "bot.adapters.discord_adapter:DiscordAdapter",
    "bot.adapters.telegram_adapter:TelegramAdapter",
]


def register(sub) -> None:
    p = sub.add_parser("run", help="run the bot (the default command)")
    p.add_argument("--wait", action="store_true",
                   help="console: after the last input line, wait for the jobs it started")
    p.add_argument("--no-console", action="store_true", help="never open the console chat")
    p.set_defaults(func=run)


def adapter_class(path: str) -> Any:
    """The chat adapter class ``path`` names (``configured(config)``; built with the app)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


async def _serve_chat(adapter: Adapter, stop: asyncio.Event) -> None:
    try:
        await serve(adapter, stop)
    except asyncio.CancelledError:
        raise
    except Exception as err:  # one adapter failing (bad token, network) leaves the others running
        log.error("%s adapter stopped: %s: %s", adapter.platform, type(err).__name__, err)


async def run(args, config) -> int:
    from bot.adapters.console import Console

    allocator.configure()   # before the app's threads allocate anything
    app = await App.create(config)
    trimming = asyncio.create_task(allocator.trim_every(TRIM_EVERY_S))
    stop = asyncio.Event()
    status = 0
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        classes = [cls for cls in map(adapter_class, ADAPTERS) if cls.configured(config)]
        mode = config.console.enabled
        use_console = not args.no_console and (mode == "on" or (mode == "auto" and not classes))
        if not classes and not use_console:
            log.error("nothing to run: no chat adapter is configured and the console is off")
            return 1
        chat = [app.adapters.add(cls(app)) for cls in classes]
        console = app.adapters.add(Console(app, wait=args.wait)) if use_console else None
        await app.start()
        adapters_stop = asyncio.Event()
        tasks = [asyncio.create_task(_serve_chat(a, adapters_stop), name=a.platform) for a in chat]
        if console:
            console_task = asyncio.create_task(serve(console, stop))
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait([console_task, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            await console_task  # the input ended (or the bot is stopping)
            if not chat:
                stop.set()
        if tasks:
            stopper = asyncio.create_task(stop.wait())
            adapters = asyncio.gather(*tasks)  # _serve_chat never raises: this ends when all stopped
            either: list[asyncio.Future[Any]] = [stopper, adapters]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not stop.is_set():
                log.error("every chat adapter stopped; shutting down")
                status = 1
        # Jobs first, while the adapters can still post their "interrupted" notes; then adapters.
        await app.jobs.shutdown()
        if app.background:
            await asyncio.wait(list(app.background), timeout=5)
        # Commands under way answer while their adapter can still post (a SIGTERM right after a
        # /help would otherwise close the session under it).
        await app.drain()
        adapters_stop.set()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=15)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        trimming.cancel()
        await app.close()
    return status
