"""A bot's configuration file for a test: ``write_config(folder, sections)`` writes
``folder``/config.toml with the data folder at ``folder``/data (relative paths in the file are
relative to it) and the given TOML tables; ``llm(server)`` is the ``[llm]`` table of a bot that
talks to a fake OpenAI endpoint and retries at once. Tests that build a config in the process
use conftest's ``config`` fixture or ``engine.config.parse_config`` instead.

``MINILM`` is the ``[embedder]`` table of a bot on the English MiniLM, for the tests written for
its similarities (their thresholds, or an engine of tests/helpers/memory.py on the same data): a
table of ``write_config``'s sections or of a dict given to ``parse_config``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.config import MINILM_MODEL

MINILM: dict[str, dict[str, Any]] = {"embedder": {"model": MINILM_MODEL}}


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value))   # a TOML basic string


def write_config(folder: Path, sections: dict[str, dict[str, Any]] | None = None) -> Path:
    """``folder``/config.toml: ``[bot] data_dir = "data"`` and ``sections`` (table -> key -> value)."""
    tables = {"bot": {"data_dir": "data"}}
    for name, keys in (sections or {}).items():
        tables[name] = {**tables.get(name, {}), **keys}
    text = "".join(f"[{name}]\n" + "".join(f"{key} = {_value(value)}\n" for key, value in keys.items())
                   for name, keys in tables.items())
    path = Path(folder) / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def llm(server, **keys: Any) -> dict[str, Any]:
    """The ``[llm]`` table of a bot on the fake endpoint ``server``, retrying without waiting."""
    return {"base_url": server.base_url, "retry_max_wait_s": 0.05, **keys}
