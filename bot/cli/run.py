"""`run`: start every configured adapter in one process; the console when no chat token is set."""
from __future__ import annotations

import asyncio
import importlib
import logging
import signal

from bot.app import App

log = logging.getLogger(__name__)

# Chat adapters besides the console: modules with configured(config) -> bool and
# async serve(app, stop: asyncio.Event). Each starts only when configured.
ADAPTERS: list[str] = [
    "bot.adapters.discord_adapter",
    "bot.adapters.telegram_adapter",
]


def register(sub) -> None:
    p = sub.add_parser("run", help="run the bot (the default command)")
    p.add_argument("--wait", action="store_true",
                   help="console: after the last input line, wait for the jobs it started")
    p.add_argument("--no-console", action="store_true", help="never open the console chat")
    p.set_defaults(func=run)


async def _serve_adapter(name: str, module, app: App, stop: asyncio.Event) -> None:
    try:
        await module.serve(app, stop)
    except asyncio.CancelledError:
        raise
    except Exception as err:  # one adapter failing (bad token, network) leaves the others running
        label = name.rsplit(".", 1)[-1].removesuffix("_adapter")
        log.error("%s adapter stopped: %s: %s", label, type(err).__name__, err)


async def run(args, config) -> int:
    from bot.adapters.console import Console

    app = await App.create(config)
    stop = asyncio.Event()
    status = 0
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        chat = [(name, importlib.import_module(name)) for name in ADAPTERS]
        chat = [(name, mod) for name, mod in chat if mod.configured(config)]
        mode = config.console.enabled
        use_console = not args.no_console and (mode == "on" or (mode == "auto" and not chat))
        console = Console(app) if use_console else None
        await app.start()
        if console:
            await app.platform_ready("console")
        adapters_stop = asyncio.Event()
        tasks = [asyncio.create_task(_serve_adapter(n, m, app, adapters_stop), name=n) for n, m in chat]
        if console:
            console_task = asyncio.create_task(console.run(wait=args.wait))
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait([console_task, stopper], return_when=asyncio.FIRST_COMPLETED)
            if console_task.done():
                console_task.result()
                if not chat:
                    stop.set()
            else:
                console_task.cancel()
            stopper.cancel()
        if not tasks and not console:
            log.error("nothing to run: no chat adapter is configured and the console is off")
            return 1
        if tasks:
            stopper = asyncio.create_task(stop.wait())
            adapters = asyncio.gather(*tasks)  # _serve_adapter never raises: this ends when all stopped
            await asyncio.wait([stopper, adapters], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not stop.is_set():
                log.error("every chat adapter stopped; shutting down")
                status = 1
        else:
            await stop.wait()
        # Jobs first, while the adapters can still post their "interrupted" notes; then adapters.
        await app.jobs.shutdown()
        if app.background:
            await asyncio.wait(list(app.background), timeout=5)
        adapters_stop.set()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=15)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await app.close()
    return status
