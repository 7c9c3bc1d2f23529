"""`python -m bot memory reembed` as a user meets it: a bot configured with another embedding model
than the stored vectors' refuses to start in one line naming the command; the command refits them,
and the bot then starts and recalls with the new model (processes on a config file)."""
from __future__ import annotations

import subprocess

from engine.config import E5_MODEL
from tests.conftest import bot_command, bot_env
from tests.helpers.config import MINILM, write_config


def test_the_bot_refuses_another_model_in_one_line_until_reembed(tmp_path):
    run = dict(capture_output=True, text=True, env=bot_env(), timeout=300)
    cfg = write_config(tmp_path, MINILM)
    first = subprocess.run(bot_command("--config", str(cfg)), input="a leak in the garage of the building\n", **run)
    assert first.returncode == 0, first.stderr

    write_config(tmp_path, {"embedder": {"model": E5_MODEL}})
    refused = subprocess.run(bot_command("--config", str(cfg)), input="/recall garage\n", **run)
    assert refused.returncode == 2
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: the stored memory vectors come from")
    assert "python -m bot memory reembed" in errors[0]

    refit = subprocess.run(bot_command("--config", str(cfg), "memory", "reembed"), **run)
    assert refit.returncode == 0, refit.stderr
    assert f"stored vectors now come from {E5_MODEL}: memory_messages 1" in refit.stdout
    answer = subprocess.run(bot_command("--config", str(cfg)), input="/recall vazamento na garagem\n", **run)
    assert answer.returncode == 0 and "a leak in the garage of the building" in answer.stdout
