"""A run's output: the files its child process writes in the simulation folder, the rows they
hold, and what counts as an agent's action. The child writes through these names; whatever
reads a run (statistics, diagnostics, the report, exports, comparisons, stances, memory, forks)
reads through them.

In the simulation folder, per platform (``PLATFORMS``), ``<platform>/``:

- ``<platform>.db`` (``platform_db``): camel-oasis's own database (its schema: ``user``, ``post``,
  ``comment``, ``like``, ``follow``, ``trace``...). Readers open it read-only (``connect``), so a
  run can be read while it still writes; ``users`` maps its user ids to agents and names.
- ``actions.jsonl`` (``ACTIONS_LOG``): one JSON object per line, rounds counted from 0; each line
  also names the ``platform`` and its time ``ts``::

    {"type": "setup", "follows": n}                        the seeded follow graph, before round 0
    {"type": "round_start", "round": r, "hour": h, "active_agents": n, "scheduled_posts": n}
    {"type": "injected", "round": r, "id", "source", "text", "asked_by", "post_id"}
                                                           an injected event went out (engine.sim.run.injections)
    {"type": "action", "round": r, "agent_id": a, "action": "like_post", "info": {...}}
                                                           a row of oasis's trace table, bookkeeping left out
    {"type": "step_skipped", "round": r, "agent_id": a, "reason": "..."}
                                                           an agent step that gave nothing usable
    {"type": "round_end", "round": r, "rounds": n, "actions": n, "actions_total": n,
     "llm_steps": n, "llm_errors": n, "posts": [...]}
    {"type": "interview", "round": r, "agent_id": a, "question", "answer", "error"}
    {"type": "simulation_end", "rounds_done": n, "stopped": bool}

  A crash can cut the last line short: ``log_rows`` leaves broken lines out, and a resumed run
  drops the lines after its checkpoint's round.
- ``checkpoint.db``, ``memory.json``, ``checkpoint.json`` (``CHECKPOINT_DB``, ``MEMORY_FILE``,
  ``CHECKPOINT``): the state after the last completed round, from which a run resumes; written
  in that order, ``checkpoint.json`` last (its ``rounds_done`` commits the round).
- ``rounds/``: each completed round's fork point (``engine.sim.run.fork_points``).

In the folder itself: ``run.log`` (``RUN_LOG``, the child's stderr, secrets masked) and
``usage.jsonl`` (the child's LLM usage, ``engine.sim.run.usage_log``).

What counts as an action: every ``action`` line is a row of oasis's trace table, but not every
row is a choice of the agent. ``BOOKKEEPING`` is oasis's own: every agent refreshes its feed
before it acts, sign-ups happen at set-up and interviews are our questions (oasis 0.2.5 records
no ``update_rec_table`` or ``exit`` rows; they are named so that none would ever count). The
child logs no bookkeeping; readers of older logs skip it too. ``is_action`` is what the
statistics, exports and comparisons count, doing nothing included (it is a choice an agent
made); ``is_visible`` is an action others can see, what the diagnostics count as taking part.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator

PLATFORMS = ("twitter", "reddit")
RUN_LOG = "run.log"           # the child's stderr: warnings, library noise
ACTIONS_LOG = "actions.jsonl"
CHECKPOINT = "checkpoint.json"
CHECKPOINT_DB = "checkpoint.db"
MEMORY_FILE = "memory.json"

# The types of actions.jsonl's lines.
SETUP = "setup"
ROUND_START = "round_start"
INJECTED = "injected"          # also the child's event when it publishes an injected event
ACTION = "action"
STEP_SKIPPED = "step_skipped"
ROUND_END = "round_end"
INTERVIEW = "interview"
SIMULATION_END = "simulation_end"

BOOKKEEPING = frozenset({"sign_up", "refresh", "update_rec_table", "interview", "exit"})
DO_NOTHING = "do_nothing"
WORDS = frozenset({"create_post", "quote_post", "create_comment"})   # actions that carry the agent's own words
# The actions that write a post, and the key of their ``info`` that names the post written.
POST_MADE = {"create_post": "post_id", "quote_post": "new_post_id", "repost": "new_post_id"}


def is_action(action: str) -> bool:
    """A choice of the agent, doing nothing included: anything but oasis's bookkeeping."""
    return action.lower() not in BOOKKEEPING


def is_visible(action: str) -> bool:
    """An action others can see: a choice of the agent other than doing nothing."""
    return is_action(action) and action.lower() != DO_NOTHING


def platform_dir(folder: Path, platform: str) -> Path:
    return Path(folder) / platform


def platform_db(folder: Path, platform: str) -> Path:
    return Path(folder) / platform / f"{platform}.db"


def actions_log(folder: Path | str, platform: str) -> Path:
    return Path(folder) / platform / ACTIONS_LOG


def platforms_of(folder: Path) -> list[str]:
    """The platforms the run has a database of, in ``PLATFORMS`` order."""
    return [p for p in PLATFORMS if platform_db(folder, p).exists()]


def connect(db_path: Path) -> sqlite3.Connection:
    """A platform database opened read-only (the run may still be writing it), rows by name."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def users(conn: sqlite3.Connection) -> dict[int, tuple[int, str]]:
    """A platform database's user id -> (agent id, name shown)."""
    return {r["user_id"]: (r["agent_id"], r["user_name"] or r["name"] or f"agent{r['agent_id']}")
            for r in conn.execute("SELECT user_id, agent_id, user_name, name FROM user")}


def log_rows(path: Path, containing: Iterable[str] = ()) -> Iterator[dict[str, Any]]:
    """The rows of an actions.jsonl in order; lines that are no JSON object (a crash can cut the
    last one short) are left out. Given ``containing``, a line that holds none of those strings
    is skipped unparsed (most lines are likes, follows and round marks)."""
    if not path.exists():
        return
    marks = tuple(containing)
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if marks and not any(mark in line for mark in marks):
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


def read_log(path: Path) -> tuple[list[dict[str, Any]], int, int]:
    """The action lines of an actions.jsonl (action names in lower case, rounds as int), the
    number of rounds it records as ended and the number of agent steps it records as skipped.
    Other rows and rows without a usable round are left out."""
    actions, rounds_done, skipped = [], 0, 0
    for row in log_rows(path):
        try:
            kind, rnd = row.get("type"), int(row["round"])
        except (KeyError, TypeError, ValueError):
            continue
        if kind == ROUND_END:
            rounds_done = max(rounds_done, rnd + 1)
        elif kind == STEP_SKIPPED:
            skipped += 1
        elif kind == ACTION and isinstance(row.get("action"), str):
            actions.append({**row, "action": row["action"].lower(), "round": rnd})
    return actions, rounds_done, skipped
