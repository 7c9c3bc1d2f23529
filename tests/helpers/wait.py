"""Waiting for a condition in a test: poll it with a deadline, never sleep a guessed time."""
from __future__ import annotations

import asyncio
import inspect
import subprocess
import time


async def until(condition, timeout: float, what: str = "the condition", process: subprocess.Popen | None = None,
                every: float = 0.05):
    """Poll ``condition()`` (a function, or a coroutine function) until its value is true and
    return that value. AssertionError naming ``what`` after ``timeout`` seconds, or as soon as
    ``process`` (a bot started by the test) has exited."""
    deadline = time.monotonic() + timeout
    while not (value := (await result) if inspect.isawaitable(result := condition()) else result):
        assert process is None or process.poll() is None, \
            f"the bot exited ({process.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(every)
    return value
