"""What the fake chat servers share: an aiohttp app on 127.0.0.1 at a free port, the calls the
bot made, and waiting until one of them matches."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from aiohttp import web


class LocalServer:
    def __init__(self):
        self.calls: list[Any] = []
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _serve(self, app: web.Application) -> None:
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started TCP site's server

    async def _close(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    def _poke(self) -> None:
        """Something changed (a call arrived, an update was queued): wake whoever waits."""
        self._changed.set()

    async def _next_change(self, seconds: float) -> None:
        """Return at the next change, or after ``seconds``."""
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), max(seconds, 0))
        except asyncio.TimeoutError:
            pass

    async def _wait_for_call(self, matches: Callable[[Any], bool], timeout: float,
                             failure: Callable[[], str]) -> Any:
        """The first recorded call that ``matches``, waiting up to ``timeout`` seconds for it;
        AssertionError(``failure()``) when none came."""
        deadline = time.monotonic() + timeout
        while True:
            for call in self.calls:
                if matches(call):
                    return call
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(failure())
            await self._next_change(left)
