"""The simulated world becomes memory: a run's posts and comments go into the simulation's
memory scope (``sim:<sim_id>``, engine.memory.sim_scopes), one channel per platform.

What is remembered, from each platform's ``actions.jsonl`` (rounds from 0 there, from 1 here):
``create_post``, ``quote_post`` (the quote's own words, read from the platform's database: the log
has only the ids), ``create_comment`` and ``injected`` events (the contract of /sim inject). A
plain repost adds no words of its own and is left out. Each message is written by the agent's
name (from the environment; an account of no agent by its user name; an injected event by its
source), at the round's simulated time, with a stable id: ``<platform>:post:<post_id>`` or
``<platform>:comment:<comment_id>`` (an injected event is a post too, so its id is its post's). A
message already stored is skipped by the memory engine (same scope, channel and id), so feeding
a round twice, or the whole run after some of its rounds, stores nothing twice.

``round_observer(memory)`` is the run service's round observer (engine.sim.run.observers) that
feeds each completed round as it ends; ``ingest_run`` feeds every round a run has logged (the
report does it first, so a simulation run without the observer, or before it existed, is
searchable too). Files are read off the event loop; the memory engine embeds off it.
"""
from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

from engine.memory import MemoryEngine, MemoryMessage
from engine.memory.sim_scopes import sim_scope
from engine.offload import run_cpu
from engine.sim.environment.models import CONFIG_FILE, SimulationConfig, TimeConfig
from engine.sim.run.injections import DEFAULT_SOURCE
from engine.sim.run.observers import RoundDone, RoundObserver
from engine.sim.run.output import ACTION, INJECTED, PLATFORMS, WORDS, actions_log, connect, log_rows, platform_db, users

log = logging.getLogger(__name__)

def message_id(platform: str, kind: str, number: Any) -> str:
    """The memory id of a platform's post or comment (``twitter:post:12``)."""
    return f"{platform}:{kind}:{number}"


def parse_message_id(mid: str) -> tuple[str, str, int] | None:
    """(platform, 'post' | 'comment', number) of a memory id made by ``message_id``, else None."""
    parts = mid.split(":")
    if len(parts) != 3 or parts[0] not in PLATFORMS or parts[1] not in ("post", "comment") or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def _log_lines(path: Path, rounds: set[int] | None) -> Iterator[dict]:
    """The lines of an actions.jsonl that carry words, of the given 0-based rounds (all: None);
    other events and broken lines (a crash can cut the last one short) are left out."""
    for row in log_rows(path, containing=(*WORDS, INJECTED)):
        try:
            rnd = int(row["round"])
        except (KeyError, TypeError, ValueError):
            continue
        if rounds is not None and rnd not in rounds:
            continue
        if row.get("type") == INJECTED or (row.get("type") == ACTION and row.get("action") in WORDS
                                          and isinstance(row.get("info"), dict)):
            yield row


def _environment(folder: Path) -> SimulationConfig | None:
    path = folder / CONFIG_FILE
    if not path.exists():
        return None
    try:
        return SimulationConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as err:
        log.warning("simulation memory: %s is unreadable (%s); agents are named by id", path, err)
        return None


def _platform_names_and_quotes(db_path: Path, quote_ids: list[int]) -> tuple[dict[int, str], dict[int, str]]:
    """user id -> name shown, and post id -> quote text, from the platform's database (read-only:
    the run may still be writing it)."""
    if not db_path.exists():
        return {}, {}
    conn = connect(db_path)
    try:
        names = {uid: name for uid, (_, name) in users(conn).items()}
        quotes: dict[int, str] = {}
        for i in range(0, len(quote_ids), 500):
            part = quote_ids[i:i + 500]
            quotes.update((r["post_id"], r["quote_content"]) for r in conn.execute(
                f"SELECT post_id, quote_content FROM post WHERE post_id IN ({','.join('?' * len(part))})", part)
                if r["quote_content"])
        return names, quotes
    finally:
        conn.close()


def platform_messages(folder: Path, sim_id: str, platform: str, rounds: set[int] | None = None) -> list[MemoryMessage]:
    """The memory messages of one platform's posts, quotes, comments and injected events in the
    given rounds (numbered from 1; None: every round logged), in log order (blocking)."""
    folder = Path(folder)
    zero_based = None if rounds is None else {r - 1 for r in rounds}
    rows = list(_log_lines(actions_log(folder, platform), zero_based))
    if not rows:
        return []
    env = _environment(folder)
    clock = env.time if env is not None else TimeConfig()
    quote_ids = [r["info"]["new_post_id"] for r in rows
                 if r.get("action") == "quote_post" and isinstance(r["info"].get("new_post_id"), int)]
    names, quotes = _platform_names_and_quotes(platform_db(folder, platform), quote_ids)
    agents = {a.agent_id: a.name for a in env.agents} if env is not None else {}

    def author(agent_id: Any) -> str:   # an agent's full name; an account of no agent (a news source): its user name
        return agents.get(agent_id) or names.get(agent_id) or f"agent {agent_id}"

    scope = sim_scope(sim_id)
    out: list[MemoryMessage] = []
    in_round: Counter[int] = Counter()
    for row in rows:
        said = _words(row, platform, author, quotes)
        if said is None:
            continue
        # the round's simulated time, one second apart in log order (memory keeps a channel's order by time)
        rnd = int(row["round"])
        in_round[rnd] += 1
        ts = clock.round_start(rnd).replace(tzinfo=timezone.utc) + timedelta(seconds=in_round[rnd])
        out.append(MemoryMessage(scope, platform, *said, ts))
    return out


def _words(row: dict, platform: str, author, quotes: dict[int, str]) -> tuple[str, str, str] | None:
    """(message id, author, text) of one log line, or None when it carries no usable words."""
    info = row.get("info") or {}
    if row["type"] == INJECTED:
        kind, number, who, text = "post", row.get("post_id"), str(row.get("source") or DEFAULT_SOURCE), row.get("text")
    elif row["action"] == "create_comment":
        kind, number, who, text = "comment", info.get("comment_id"), author(row.get("agent_id")), info.get("content")
    elif row["action"] == "quote_post":
        number = info.get("new_post_id")
        kind, who, text = "post", author(row.get("agent_id")), quotes.get(number) if isinstance(number, int) else None
    else:
        kind, number, who, text = "post", info.get("post_id"), author(row.get("agent_id")), info.get("content")
    if not isinstance(number, int) or not isinstance(text, str) or not text.strip():
        return None
    return message_id(platform, kind, number), who, text


def run_messages(folder: Path, sim_id: str) -> list[MemoryMessage]:
    """Every platform's messages, every round logged (blocking)."""
    return [m for platform in PLATFORMS for m in platform_messages(folder, sim_id, platform)]


async def ingest_round(memory: MemoryEngine, folder: Path, sim_id: str, platform: str, round_no: int) -> int:
    """Feed one completed round (numbered from 1) of one platform; returns the messages newly stored."""
    messages = await run_cpu(platform_messages, folder, sim_id, platform, {round_no})
    return len(await memory.ingest_many(messages))


async def ingest_run(memory: MemoryEngine, folder: Path, sim_id: str) -> int:
    """Feed every round the run has logged so far; returns the messages newly stored."""
    messages = await run_cpu(run_messages, folder, sim_id)
    return len(await memory.ingest_many(messages))


def round_observer(memory: MemoryEngine) -> RoundObserver:
    """The round observer that feeds each completed round into the simulation's memory scope."""

    async def remember_round(done: RoundDone) -> None:
        stored = await ingest_round(memory, done.folder, done.sim_id, done.platform, done.round)
        log.debug("simulation %s %s round %d: %d messages remembered", done.sim_id, done.platform, done.round,
                  stored)

    return remember_round
