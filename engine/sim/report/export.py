"""Exports of a run: its per-round trajectory (CSV and JSONL) and a Markdown transcript.

Trajectory: one row per platform and round (rounds from 1, quiet rounds included) read from
``<sim>/<platform>/actions.jsonl``: the actions taken by type (oasis bookkeeping such as
refreshes left out, as in the report's statistics), the agents who acted, the posts (original
posts and quotes) and comments written, the events injected, and the belief split (for /
neutral / against and the mean score) when stances were tracked; empty belief cells when not.
The CSV has one ``actions_<type>`` column per action type the run used; each JSONL line holds
the same values, the counts by type as the object ``actions_by_type``.

Transcript: per round and platform, the posts and comments from the platform databases with
their author, post (or comment) id and the author's stance label in that round when known;
injected posts are marked with who asked for them. Its headings and labels are in the current
language (the report job's), the agents' words as they wrote them.

An ensemble (engine.sim.ensemble) exports all its runs in the same files: the trajectory's
``run`` column (1 for a simulation of one run) says which run a row is of, and the transcript has
one part per run.

``write_exports`` is blocking (call it through ``run_cpu``); ``export_simulation`` reads the
stances from the bot's database and writes off the event loop.
"""
from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.i18n import _
from engine.offload import run_cpu
from engine.sim.inject.logged import Injected, read_injected
from engine.sim.report.stats import compute_stats
from engine.sim.run.output import PLATFORMS, actions_log, connect, is_action, platform_db, platforms_of, read_log, users
from engine.sim.stance.history import Beliefs, load_beliefs
from engine.sim.stance.tracking import stance_name
from engine.words import plural

TRAJECTORY_CSV, TRAJECTORY_JSONL, TRANSCRIPT_MD = "trajectory.csv", "trajectory.jsonl", "transcript.md"
POSTS, COMMENTS = {"create_post", "quote_post"}, {"create_comment"}
BELIEF_COLUMNS = ("belief_for", "belief_neutral", "belief_against", "belief_mean")


@dataclass
class RoundRow:
    round: int                      # from 1
    platform: str
    actions: dict[str, int]         # action type -> count
    active_agents: int
    posts: int
    comments: int
    injected: int
    belief: dict[str, float | int | None] = field(default_factory=lambda: dict.fromkeys(BELIEF_COLUMNS))
    run: int = 1                    # which run of an ensemble

    @property
    def total(self) -> int:
        return sum(self.actions.values())


@dataclass
class ExportFiles:
    csv: Path
    jsonl: Path
    transcript: Path
    rows: int


def trajectory(sim_dir: Path | str, beliefs: Beliefs | None = None,
               injected: list[Injected] | None = None) -> list[RoundRow]:
    """The per-round rows of every platform of the run (blocking)."""
    sim_dir = Path(sim_dir)
    beliefs = beliefs or Beliefs()
    injected = read_injected(sim_dir) if injected is None else injected
    rows: list[RoundRow] = []
    for platform in platforms_of(sim_dir):
        actions, rounds_done, _ = read_log(actions_log(sim_dir, platform))
        by_round: dict[int, list[dict]] = {}
        for a in actions:
            if is_action(a["action"]):
                by_round.setdefault(a["round"] + 1, []).append(a)
        last = max([rounds_done, *by_round, *(i.round for i in injected if i.platform == platform)], default=0)
        for rnd in range(1, last + 1):
            done = by_round.get(rnd, [])
            mix = Counter(a["action"] for a in done)
            row = RoundRow(rnd, platform, dict(sorted(mix.items())),
                           len({a["agent_id"] for a in done if a.get("agent_id") is not None}),
                           sum(mix[a] for a in POSTS), sum(mix[a] for a in COMMENTS),
                           sum(1 for i in injected if i.platform == platform and i.round == rnd))
            if (split := beliefs.split(platform, rnd)) is not None:
                row.belief = {"belief_for": split.for_, "belief_neutral": split.neutral,
                              "belief_against": split.against, "belief_mean": split.mean}
            rows.append(row)
    return sorted(rows, key=lambda r: (r.round, PLATFORMS.index(r.platform)))


def _write_trajectory(rows: list[RoundRow], out: Path) -> tuple[Path, Path]:
    types = sorted({t for r in rows for t in r.actions})
    header = ["run", "round", "platform", "actions", *(f"actions_{t}" for t in types), "active_agents", "posts",
              "comments", "injected", *BELIEF_COLUMNS]
    csv_path, jsonl_path = out / TRAJECTORY_CSV, out / TRAJECTORY_JSONL
    with csv_path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for r in rows:
            writer.writerow([r.run, r.round, r.platform, r.total, *(r.actions.get(t, 0) for t in types),
                             r.active_agents, r.posts, r.comments, r.injected,
                             *("" if r.belief[c] is None else r.belief[c] for c in BELIEF_COLUMNS)])
    with jsonl_path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({"run": r.run, "round": r.round, "platform": r.platform, "actions": r.total,
                                 "actions_by_type": r.actions, "active_agents": r.active_agents, "posts": r.posts,
                                 "comments": r.comments, "injected": r.injected, **r.belief}) + "\n")
    return csv_path, jsonl_path


@dataclass
class Comment:
    platform: str
    comment_id: int
    post_id: int
    author_id: int
    author: str
    content: str
    round: int | None   # from 1


def read_comments(sim_dir: Path | str, platform: str) -> list[Comment]:
    """The comments of one platform with their authors and rounds (from the log; without one,
    oasis's round stamp where the platform writes one) (blocking)."""
    sim_dir = Path(sim_dir)
    actions, _, _ = read_log(actions_log(sim_dir, platform))
    rounds = {a["info"]["comment_id"]: a["round"] + 1 for a in actions
              if a["action"] == "create_comment" and isinstance(a.get("info"), dict)
              and isinstance(a["info"].get("comment_id"), int)}
    conn = connect(platform_db(sim_dir, platform))
    try:
        authors = users(conn)
        comments = []
        for r in conn.execute("SELECT comment_id, post_id, user_id, content, created_at FROM comment"
                              " ORDER BY comment_id"):
            agent_id, name = authors.get(r["user_id"], (r["user_id"], f"user{r['user_id']}"))
            stamp = str(r["created_at"])
            comments.append(Comment(platform, r["comment_id"], r["post_id"], agent_id, name, r["content"] or "",
                                    rounds.get(r["comment_id"], int(stamp) + 1 if stamp.isdigit() else None)))
        return comments
    finally:
        conn.close()


def transcript(sim_dir: Path | str, sim_id: str, beliefs: Beliefs | None = None,
               injected: list[Injected] | None = None) -> str:
    """The posts and comments of the run per round, as Markdown (blocking)."""
    sim_dir = Path(sim_dir)
    beliefs = beliefs or Beliefs()
    injected = read_injected(sim_dir) if injected is None else injected
    stats = compute_stats(sim_dir)
    marks = {(i.platform, i.post_id): i for i in injected if i.post_id is not None}
    entries: dict[int | None, dict[str, list[tuple[int, int, str]]]] = {}

    def stance(platform: str, rnd: int | None, agent_id: int) -> str:
        label = beliefs.label(platform, rnd, agent_id) if rnd is not None else None
        return f" ({stance_name(label)})" if label else ""

    for p in stats.posts:
        rnd = None if p.round is None else p.round + 1
        event = marks.get((p.platform, p.post_id))
        what = _("injected event, asked by {who}", who=event.asked_by) if event else ""
        line = (_("- post {post}", post=p.post_id)
                + f" · **@{p.author}**{'' if event else stance(p.platform, rnd, p.author_id)}"
                + (f" · {what}" if what else "") + f": {_one_line(p.content)}")
        entries.setdefault(rnd, {}).setdefault(p.platform, []).append((0, p.post_id, line))
    comments = [c for platform in stats.platforms for c in read_comments(sim_dir, platform)]
    for c in comments:
        line = (_("- comment {comment} on post {post}", comment=c.comment_id, post=c.post_id)
                + f" · **@{c.author}**{stance(c.platform, c.round, c.author_id)}: {_one_line(c.content)}")
        entries.setdefault(c.round, {}).setdefault(c.platform, []).append((1, c.comment_id, line))
    lines = [_("# Transcript of simulation `{sim}`", sim=sim_id), "",
             _("{posts}, {comments}; {stances}",
               posts=plural(len(stats.posts), "{n} post or quote", "{n} posts and quotes"),
               comments=plural(len(comments), "{n} comment", "{n} comments"),
               stances=_("each author's stance in that round in brackets.") if beliefs
               else _("stances were not tracked.")), ""]
    for rnd in sorted(entries, key=lambda r: (r is None, r or 0)):
        lines += [_("## Round {round}", round=rnd) if rnd is not None else _("## Round unknown"), ""]
        for platform in sorted(entries[rnd], key=lambda p: stats.platforms.index(p)):
            lines += [f"### {platform}", ""] + [line for *_, line in sorted(entries[rnd][platform])] + [""]
    return "\n".join(lines)


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class ExportRun:
    """One run to export: its number in its ensemble (1 for a simulation of one run), id, folder, stances."""
    run: int
    sim_id: str
    folder: Path
    beliefs: Beliefs


def write_exports(runs: list[ExportRun], out_dir: Path | str, sim_id: str) -> ExportFiles:
    """trajectory.csv, trajectory.jsonl and transcript.md of simulation ``sim_id``'s runs into
    ``out_dir`` (blocking)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, parts = [], []
    for r in runs:
        injected = read_injected(r.folder)
        for row in trajectory(r.folder, r.beliefs, injected):
            row.run = r.run
            rows.append(row)
        parts.append(transcript(r.folder, r.sim_id, r.beliefs, injected))
    csv_path, jsonl_path = _write_trajectory(rows, out)
    md = out / TRANSCRIPT_MD
    if len(runs) == 1:
        md.write_text(parts[0], encoding="utf-8")
    else:   # one part per run, its headings a level down
        text = [f"# Transcript of simulation `{sim_id}`, {len(runs)} runs", ""]
        for r, part in zip(runs, parts):
            body = part.split("\n", 1)[1]
            text += [f"# Run {r.run} (`{r.sim_id}`)", body.replace("\n### ", "\n#### ").replace("\n## ", "\n### ")]
        md.write_text("\n".join(text), encoding="utf-8")
    return ExportFiles(csv_path, jsonl_path, md, len(rows))


async def export_simulation(db, sim_id: str, sim_dir: Path | str, out_dir: Path | str,
                            runs: list[tuple[int, str, Path]] | None = None) -> ExportFiles:
    """The exports of simulation ``sim_id``, with its stances from ``db`` when it has any; an
    ensemble's ``runs``: (run number, id, folder) of each."""
    runs = runs or [(1, sim_id, Path(sim_dir))]
    found = [ExportRun(k, run_id, Path(folder), await load_beliefs(db, run_id)) for k, run_id, folder in runs]
    return await run_cpu(write_exports, found, out_dir, sim_id)
