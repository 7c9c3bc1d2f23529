"""A run child sees the LLM key and no chat token, and its run.log never shows a secret.

The real child process runs camel-oasis against the fake OpenAI server, which refuses the key
the way OpenAI does (quoting it in a 401); every agent step fails, the child ends with a
traceback that holds the key, and run.log, the child's events and the logs must mask it."""
from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import parse_config
from engine.logsetup import setup_logging
from engine.sim.run.executor import LocalExecutor
from engine.sim.run.output import RUN_LOG
from engine.sim.run.protocol import SPEC_FILE, RunSpec
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI, Raw
from tests.helpers.sim import make_sim_folder

pytestmark = pytest.mark.timeout(180)

LLM_KEY = "sk-proj-Zq81secretLLMkey"
DISCORD = "discord-secret-token-4411"
TELEGRAM = "777:telegram-secret-token"


def refuse_key(body: dict) -> Raw:
    return Raw(401, {"error": {"message": f"Incorrect API key provided: {LLM_KEY}.",
                               "type": "invalid_request_error", "code": "invalid_api_key"}})


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)


async def test_child_gets_only_the_llm_key_and_masks_it_in_run_log_and_events(tmp_path, monkeypatch):
    monkeypatch.setenv("DISCORD_TOKEN", DISCORD)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TELEGRAM)
    monkeypatch.setenv("WORLDBOT_TEST_LLM_KEY", LLM_KEY)
    folder = tmp_path / "sim"
    make_sim_folder(folder, agents=3, rounds=2)
    with FakeOpenAI(refuse_key) as llm:
        spec = RunSpec(base_url=llm.base_url, model="fake-model", api_key_env="WORLDBOT_TEST_LLM_KEY",
                       idle_s=0.0, timeout_s=20.0)
        (folder / SPEC_FILE).write_text(spec.to_json(), encoding="utf-8")
        handle = await LocalExecutor(kill_grace=3.0).start("s1", folder)
        env = environ_of(handle.pid)
        events = [e async for e in handle.events()]
        authorizations = list(llm.authorizations)

    assert "DISCORD_TOKEN" not in env and "TELEGRAM_BOT_TOKEN" not in env
    assert env["WORLDBOT_TEST_LLM_KEY"] == LLM_KEY and "PATH" in env
    assert f"Bearer {LLM_KEY}" in authorizations  # the child used the key it was given

    errors = [e["message"] for e in events if e["type"] == "error"]
    assert errors and "Incorrect API key provided: ***" in errors[-1]
    assert LLM_KEY not in repr(events)
    run_log = (folder / RUN_LOG).read_text(encoding="utf-8")
    assert "Traceback" in run_log and "Incorrect API key provided: ***" in run_log
    assert LLM_KEY not in run_log and DISCORD not in run_log


def test_secret_in_an_exception_is_masked_in_the_log_traceback(tmp_path, monkeypatch):
    """The bot's own log: the secret in an exception message and in the traceback's source
    lines is masked, in a real process logging to stderr."""
    monkeypatch.setenv("WORLDBOT_TEST_TOKEN", "tok-very-secret-99")
    script = (
        "import logging\n"
        "from engine.config import parse_config\n"
        "from engine.logsetup import setup_logging\n"
        "setup_logging(parse_config({}))\n"
        "try:\n"
        "    raise RuntimeError('login refused for tok-very-secret-99')\n"
        "except RuntimeError:\n"
        "    logging.getLogger('x').exception('adapter failed')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    assert "adapter failed" in done.stderr and "Traceback" in done.stderr
    assert "RuntimeError: login refused for ***" in done.stderr
    assert "tok-very-secret-99" not in done.stderr


def test_config_named_secret_with_an_ordinary_name_is_masked(monkeypatch, capsys):
    monkeypatch.setenv("MY_DISCORD_CREDS", "creds-abcdef-123")
    config = parse_config({"discord": {"token_env": "MY_DISCORD_CREDS"}})
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging(config)
        logging.getLogger("x").warning("logging in with %s", "creds-abcdef-123")
        for handler in root.handlers:
            handler.flush()
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "logging in with ***" in err and "creds-abcdef-123" not in err


def test_masked_output_covers_prints_raw_writes_split_secrets_and_an_uncaught_traceback(tmp_path):
    script = (
        "import os\n"
        "from engine.redact import Redactor\n"
        "from engine.sim.run.child.masked_output import mask_output\n"
        "mask_output(Redactor(['hunter2-secret']))\n"
        "print('printed hunter2-secret', flush=True)\n"
        "os.write(2, b'raw write hunter2-')\n"
        "os.write(2, b'secret tail\\n')\n"
        "raise RuntimeError('boom hunter2-secret')\n")
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        done = subprocess.run([sys.executable, "-c", script], stdout=out, stderr=out, timeout=60,
                              cwd=str(REPO))
    text = log.read_text()
    assert done.returncode == 1
    assert "printed ***" in text and "raw write *** tail" in text and "RuntimeError: boom ***" in text
    assert "hunter2" not in text
