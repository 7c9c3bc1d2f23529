"""Two small runs for the comparison and export tests: A, the sample run of tests/helpers/simdata, and B,
a fork of it after round 1 in which a news account's post was injected at round 2 on Twitter.

Both are played by camel-oasis's own Platform (no LLM). B's round 1 is A's, line for line; from
round 2 its Twitter differs. The injected post is Twitter post 4 of B; who saw it and engaged
with it is worked out by hand below (``TRAVEL``). Stances, as the stance observer writes them,
are inserted by ``write_stances``.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.helpers.simdata import REDDIT, TWITTER, A, B, C, D, E, F, build_simulation, sample_simulation

NEWS = 6
EVENT = "BREAKING: the council scraps the fare hike"
FORK_TWITTER = [row for row in TWITTER if row[0] == 0] + [
    (1, NEWS, "sign_up", ("newsdesk", "News Desk", "the news")),
    (1, NEWS, "create_post", EVENT),                       # post 4: the injected event
    (1, E, "like_post", 4),
    (1, F, "quote_post", (4, "Finally some good news.")),  # post 5
    (1, B, "create_comment", (4, "About time.")),
    (2, A, "like_post", 5),
    (2, C, "create_post", "Still waiting for the vote."),  # post 6
    (2, D, "do_nothing", None),
]
# who saw the injected post: feeds of agents 0 and 3 (3 through a repost), 2's feed lacked it;
# the news account's own feed does not count; engagers saw it.
FEEDS = {A: [4, 1], D: [4], C: [1, 2], NEWS: [4]}
TRAVEL = {"saw": {A, B, D, E, F}, "replied": {B}, "reposted": {F}, "liked": {E}}

# stances per (platform, round from 1) -> agent scores
STANCES_A = {("twitter", r): {A: 0.6, B: -0.6, C: 0.0, D: -0.3, E: 0.1, F: -0.5} for r in (1, 2, 3)}
STANCES_B = {**{("twitter", 1): STANCES_A[("twitter", 1)]},
             **{("twitter", r): {A: 0.7, B: 0.4, C: 0.3, D: -0.3, E: 0.5, F: 0.6} for r in (2, 3)}}


def _inject(sim: Path) -> None:
    db = sqlite3.connect(sim / "twitter" / "twitter.db")
    with db:
        for agent, posts in FEEDS.items():
            db.execute("INSERT INTO trace(user_id, created_at, action, info) VALUES (?, 1, 'refresh', ?)",
                       (agent, json.dumps({"posts": [{"post_id": p, "content": "…"} for p in posts]})))
    db.close()
    with (sim / "twitter" / "actions.jsonl").open("a", encoding="utf-8") as log:
        log.write("\n" + json.dumps({"type": "injected", "round": 1, "id": "ev1", "source": "News Desk",
                                     "text": EVENT, "asked_by": "u1", "post_id": 4}) + "\n")


_built: dict[str, Path] = {}


def two_runs(tmp_path_factory, into: Path) -> tuple[Path, Path]:
    """Private copies of run A and run B under ``into`` (built once per test session)."""
    if not _built:
        _built["B"] = build_simulation(tmp_path_factory.mktemp("compare-fork") / "B",
                                       {"twitter": FORK_TWITTER, "reddit": REDDIT})
        _inject(_built["B"])
    run_a = sample_simulation(tmp_path_factory, into)   # the report tests' sample run, built once
    return run_a, shutil.copytree(_built["B"], into / "B", ignore=shutil.ignore_patterns("log"))


async def write_stances(db, sim_id: str, stances: dict) -> None:
    await db.executemany(
        "INSERT INTO sim_stances(sim_id, platform, round, agent_id, score, label) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(sim_id, platform, round, agent_id) DO UPDATE SET score=excluded.score, label=excluded.label", [
        (sim_id, platform, rnd, agent, score, "for" if score > 0.2 else "against" if score < -0.2 else "neutral")
        for (platform, rnd), scores in stances.items() for agent, score in scores.items()])
