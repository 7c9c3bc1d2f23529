"""`python -m bot` names the Python it needs in one line on any other interpreter."""
from __future__ import annotations

import ast
import subprocess
import sys

import bot.__main__ as entry
from tests.conftest import REPO, bot_command, bot_env


def test_older_and_newer_interpreters_get_one_clear_line():
    for version in ((3, 10, 12, "final", 0), (3, 12, 1, "final", 0), (3, 9, 0, "final", 0)):
        message = entry.unsupported_python(version)
        assert message is not None and "\n" not in message
        assert message.startswith("error: worldbot needs Python 3.11")
        assert "this is Python %d.%d.%d" % version[:3] in message
    assert entry.unsupported_python((3, 11, 7, "final", 0)) is None


def test_the_check_parses_on_old_interpreters_and_comes_before_the_cli():
    source = (REPO / "bot" / "__main__.py").read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 4))  # no f-strings, no annotations, no walrus
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [getattr(n, "module", None) or n.names[0].name for n in imports] == ["sys", "bot.cli"]
    assert not any(isinstance(n, ast.ImportFrom) for n in tree.body)  # the CLI is imported after the check


def test_this_interpreter_runs_the_bot():
    done = subprocess.run([*bot_command("--help")], capture_output=True, text=True, timeout=120,
                          env=bot_env(), cwd=str(REPO))
    assert done.returncode == 0 and "usage: python -m bot" in done.stdout
    assert sys.version_info[:2] == entry.SUPPORTED
