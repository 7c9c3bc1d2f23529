"""`python -m bot run` as a real process: Discord and Telegram together, one failing, SIGTERM."""
from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from tests.conftest import REPO
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegram

pytestmark = pytest.mark.timeout(90)
ROOT = REPO


async def test_one_failing_adapter_leaves_the_other_running_and_sigterm_stops_cleanly(tmp_path):
    discord_fake = await FakeDiscord().start()
    telegram_fake = await FakeTelegram("123:GOOD").start()
    config = tmp_path / "config.toml"
    config.write_text(f"""
[bot]
data_dir = "data"
log_level = "WARNING"
[discord]
token_env = "T_DISCORD"
api_base = "{discord_fake.api_base}"
gateway_url = "{discord_fake.gateway_url}"
[telegram]
token_env = "T_TELEGRAM"
base_url = "{telegram_fake.base_url}"
base_file_url = "{telegram_fake.base_file_url}"
""")
    env = {**os.environ, "T_DISCORD": "discord-token", "T_TELEGRAM": "999:WRONG-TOKEN", "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "--config", str(config), "run", cwd=str(ROOT), env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        await asyncio.wait_for(discord_fake.identified.wait(), 40)
        await asyncio.sleep(0.5)  # GUILD_CREATE handled, outlet registered
        await discord_fake.interaction("help")
        await discord_fake.wait_for("POST", "/webhooks/", lambda c: "/testsim" not in c.content
                                    and "Commands" in c.content, timeout=20)
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.wait_for(proc.wait(), 30)
        err = (await proc.stderr.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
        await discord_fake.stop()
        await telegram_fake.stop()
    assert rc == 0, err
    assert "telegram adapter stopped" in err and "WRONG-TOKEN" not in err
    assert "Traceback" not in err


async def test_discord_sync_cli_publishes_to_the_configured_guild(tmp_path):
    fake = await FakeDiscord().start()
    config = tmp_path / "config.toml"
    config.write_text(f"""
[bot]
data_dir = "data"
[discord]
token_env = "T_DISCORD"
sync_guild = "2000"
api_base = "{fake.api_base}"
gateway_url = "{fake.gateway_url}"
""")
    env = {**os.environ, "T_DISCORD": "discord-token", "PYTHONPATH": str(ROOT)}
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "--config", str(config), "discord", "sync", cwd=str(ROOT), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await fake.stop()
    assert proc.returncode == 0, err.decode()
    assert "synced" in out.decode() and "guild 2000" in out.decode() and "/help" in out.decode()
    assert len(fake.calls_to("PUT", "/applications/1000/guilds/2000/commands")) == 1
    assert not fake.identified.is_set()  # REST only: no gateway session for a sync
