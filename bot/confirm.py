"""Actions that wait for /confirm <code> (costly work). Only an administrator of the server or
group, or one of the bot's owners, may confirm (the rule is in bot.features.core's /confirm)."""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

Action = Callable[[], Awaitable[None]]


@dataclass
class Pending:
    scope: str
    action: Action
    expires: float


class Confirmations:
    def __init__(self, ttl_s: float = 600.0):
        self.ttl_s = ttl_s
        self._pending: dict[str, Pending] = {}

    def ask(self, scope: str, action: Action) -> str:
        """Hold ``action`` until it is confirmed in ``scope``; returns the code to type."""
        now = time.monotonic()
        self._pending = {c: p for c, p in self._pending.items() if p.expires > now}
        code = secrets.token_hex(3)
        self._pending[code] = Pending(scope, action, now + self.ttl_s)
        return code

    def take(self, scope: str, code: str) -> Action | None:
        """The held action if ``code`` waits in this scope and has not expired."""
        pending = self._pending.get(code)
        if pending is None or pending.scope != scope:
            return None
        del self._pending[code]
        return pending.action if pending.expires > time.monotonic() else None
