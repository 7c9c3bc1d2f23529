"""The whole tree passes ruff as pyproject.toml's [tool.ruff] configures it (pyflakes, pycodestyle's
errors, import order, bugbear): a finding fails the suite with its file, line and rule."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_ruff_finds_nothing_in_the_tree():
    found = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stdout + found.stderr
