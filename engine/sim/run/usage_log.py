"""A run's LLM usage as its child process counts it, kept in ``usage.jsonl`` of the simulation folder.

The child appends one line for every answered request: its process token and its cumulative
counts since that process started (``calls``, ``prompt_tokens``, ``completion_tokens``). The
same cumulative totals ride on its events and replies. Cumulative figures make every report
safe to apply more than once: whoever has recorded a process's earlier total adds only the
difference, so a lost event never double counts, and after a crash (of the bot or of the child)
the last line of each process says what it spent, a torn last line losing one request at most.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

USAGE_LOG = "usage.jsonl"
USAGE_KEYS = ("calls", "prompt_tokens", "completion_tokens")


class UsageLog:
    """The child's side: appends cumulative totals, one short line per write (O_APPEND)."""

    def __init__(self, folder: Path):
        self._fd = os.open(Path(folder) / USAGE_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, usage: dict) -> None:
        os.write(self._fd, (json.dumps(usage) + "\n").encode("utf-8"))

    def close(self) -> None:
        os.close(self._fd)


def read_totals(folder: Path) -> dict[str, dict[str, int]]:
    """process token -> the largest cumulative totals it logged (the parent's side, after a crash)."""
    path = Path(folder) / USAGE_LOG
    totals: dict[str, dict[str, int]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return totals
    for line in lines:
        try:
            entry = json.loads(line)
            process = str(entry["process"])
            counts = {k: int(entry[k]) for k in USAGE_KEYS}
        except (ValueError, KeyError, TypeError):
            continue  # a line torn by a kill
        if counts["calls"] >= totals.get(process, {}).get("calls", -1):
            totals[process] = counts
    return totals


def crossed(caps: list[dict], price: list[float], usage: dict) -> str:
    """The first cap (as the parent gave it: ``{"cap", "unit", "left"}``) that ``usage`` reaches,
    or ''. ``price`` is USD per million prompt and completion tokens."""
    tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    usd = (usage.get("prompt_tokens", 0) * price[0] + usage.get("completion_tokens", 0) * price[1]) / 1_000_000
    for cap in caps:
        spent = tokens if cap["unit"] == "tokens" else usd
        if spent >= cap["left"]:
            return cap["cap"]
    return ""
