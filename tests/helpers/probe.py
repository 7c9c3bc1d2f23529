"""A Python snippet run in a fresh interpreter: for what a test cannot try inside its own process
(importing oasis writes ``./log``; glibc's allocator settings and the logging set-up are once per
process). Only PYTHONPATH (the checkout) and a plain PATH are passed on."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO


def run_probe(script: str, *args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``script`` with ``args``; it must exit 0 (else its stderr's tail is the failure)."""
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def probe_json(script: str, *args: str, cwd: Path | None = None, timeout: float = 240) -> Any:
    """``run_probe``, then the JSON of the last line the script printed."""
    return json.loads(run_probe(script, *args, cwd=cwd, timeout=timeout).stdout.strip().splitlines()[-1])
