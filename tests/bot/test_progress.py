"""The progress message of a job: throttled edits that still show the latest state."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bot.neutral import Reply, Sent
from tests.helpers.chat import Outlet, make_app

pytestmark = pytest.mark.timeout(30)


class Edits(Sent):
    def __init__(self, log):
        self.log = log

    async def edit(self, text: str) -> None:
        self.log.append((time.monotonic(), "edit", text))


class Recorder(Reply):
    def __init__(self):
        self.log = []

    async def _send_one(self, text: str) -> Sent:
        self.log.append((time.monotonic(), "send", text))
        return Edits(self.log)

    async def upload(self, path: Path, caption: str = "", image: bool = False) -> Sent:
        return await self._send_one(caption)


async def test_throttled_progress_is_shown_once_the_interval_passes(tmp_path, db_url):
    app = await make_app(tmp_path, db_url, jobs={"progress_interval_s": 1.5})
    reply = Recorder()
    app.adapters.add(Outlet("test", lambda scope, channel: reply))
    gate = asyncio.Event()

    async def job(ctx):
        for i in range(1, 6):  # a quick burst, then a long quiet step
            await ctx.progress(i / 10, f"step {i}")
        await gate.wait()
        return {}

    app.jobs.register("burst", job)
    await app.start()
    submitted = await app.jobs.submit("burst", {}, "test:x", "1", title="burst")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any("step 5" in text for _, kind, text in reply.log):
        await asyncio.sleep(0.05)
    edits = [(t, text) for t, kind, text in reply.log if kind == "edit"]
    assert edits and "step 5" in edits[-1][1]  # the last state shows although nothing followed it
    assert all(b[0] - a[0] >= 1.4 for a, b in zip(edits, edits[1:]))
    assert len(edits) <= 3
    gate.set()
    await app.jobs.wait(submitted.id)
    while app.background:
        await asyncio.wait(list(app.background))
    assert reply.log[-1][1:] == ("send", reply.log[-2][2]) and reply.log[-1][2].startswith("✅ burst")
    await app.close()
