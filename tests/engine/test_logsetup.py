"""The bot's log (engine.logsetup): a library's warning with a traceback becomes one line."""
from __future__ import annotations

from tests.helpers.probe import run_probe

PROBE = """
import logging
from engine.config import parse_config
from engine.logsetup import setup_logging
setup_logging(parse_config({}))
try:
    raise ConnectionError("the database system is shutting down")
except ConnectionError:
    logging.getLogger("asyncpg.pool").warning("Failed to restore the pool connection floor; retrying", exc_info=True)
    logging.getLogger("engine.db").warning("a warning of ours, with its traceback", exc_info=True)
    logging.getLogger("asyncpg.pool").error("an error keeps its traceback", exc_info=True)
"""


def test_a_library_warning_with_a_traceback_is_one_line_and_errors_keep_theirs():
    lines = run_probe(PROBE, timeout=60).stderr.splitlines()
    (pool,) = [line for line in lines if "pool connection floor" in line]
    assert pool.endswith("retrying (ConnectionError: the database system is shutting down)"), pool
    assert sum(line.startswith("Traceback") for line in lines) == 2, lines   # ours and the error's
    assert lines[lines.index(pool) + 1].split()[2] == "WARNING", lines   # no traceback under it
