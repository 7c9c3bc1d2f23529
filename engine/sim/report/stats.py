"""Simulation statistics from the run's output (``engine.sim.run.output``): per platform, the
camel-oasis database and the ``actions.jsonl`` the run's child writes. Rounds count from 0.

The database says what exists (posts, likes, comments, reposts, follows, who wrote what);
the log says when it happened (rounds). Without a log, the ``trace`` table stands in: on
non-Reddit platforms oasis stamps it with the round number.

Events injected into the run (``injected`` lines, see ``engine.sim.run.injections``) are the
report's timeline marks: the round each went out in, on which platforms, as which post.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.sim.inject.logged import InjectedEvent, injected_events, read_injected
from engine.sim.run.output import POST_MADE, actions_log, connect, is_action, platform_db, platforms_of, read_log, users

# A follow the run step seeded before round 1 (it is in the follow table but in no logged action).
SEEDED_FOLLOW = "seeded_follow"


@dataclass
class PostStat:
    platform: str
    post_id: int
    author_id: int
    author: str
    content: str
    likes: int = 0
    dislikes: int = 0
    comments: int = 0
    reposts: int = 0      # reposts and quotes
    round: int | None = None

    @property
    def engagement(self) -> int:
        return self.likes + self.comments + self.reposts

    def cite(self) -> str:
        return f"[{self.platform} post {self.post_id}]"


@dataclass
class AgentStat:
    agent_id: int
    name: str
    actions: int = 0           # choices made (log or trace), bookkeeping excluded
    posts: int = 0             # original posts and quotes written
    engagement: int = 0        # likes + comments + reposts received on their posts
    by_platform: dict[str, int] = field(default_factory=dict)

    def cite(self) -> str:
        return f"[agent @{self.name}]"


@dataclass
class Interaction:
    platform: str
    source_id: int
    source: str
    target_id: int
    target: str
    kind: str                  # like, dislike, comment, repost, quote, follow, seeded_follow
    count: int

    @property
    def during_run(self) -> bool:
        """Made by an agent during the run, not the follow graph seeded at set-up."""
        return self.kind != SEEDED_FOLLOW


@dataclass
class SimStats:
    platforms: list[str]
    rounds: dict[str, dict[int, int]]      # platform -> round (from 0) -> actions, quiet rounds included
    mix: dict[str, dict[str, int]]         # platform -> action -> count
    posts: list[PostStat]                  # most engaged first
    agents: list[AgentStat]                # most active + engaged first
    interactions: list[Interaction]        # heaviest first; seeded follows included (see during_run)
    round_source: dict[str, str]           # platform -> 'log' | 'trace' | 'none'
    skipped_steps: dict[str, int] = field(default_factory=dict)  # platform -> agent steps skipped
    injected: list[InjectedEvent] = field(default_factory=list)  # in the order they went out

    @property
    def rounds_done(self) -> int:
        return max((max(r) + 1 for r in self.rounds.values() if r), default=0)

    @property
    def total_actions(self) -> int:
        return sum(sum(r.values()) for r in self.rounds.values()) or sum(
            sum(m.values()) for m in self.mix.values())

    def find_post(self, platform: str, post_id: int) -> PostStat | None:
        return next((p for p in self.posts if p.platform == platform and p.post_id == post_id), None)

    def find_agent(self, name_or_id: str | int) -> AgentStat | None:
        key = str(name_or_id).lstrip("@").lower()
        return next((a for a in self.agents if a.name.lower() == key or str(a.agent_id) == key), None)

    def to_dict(self, top: int = 5) -> dict[str, Any]:
        """A compact, JSON-ready view for the report agent; citations included."""
        return {
            "platforms": self.platforms,
            "total_actions": self.total_actions,
            "skipped_agent_steps": self.skipped_steps,
            "injected_events": [{"round": e.round + 1, "source": e.source, "text": e.text, "asked_by": e.asked_by,
                                 "cite": e.cites()} for e in self.injected],
            "actions_by_round": {p: {str(k): v for k, v in sorted(r.items())} for p, r in self.rounds.items()},
            "action_mix": self.mix,
            "top_posts": [{**_short(asdict(p)), "engagement": p.engagement, "cite": p.cite()}
                          for p in self.posts[:top]],
            "top_agents": [{"name": a.name, "agent_id": a.agent_id, "actions": a.actions, "posts": a.posts,
                            "engagement_received": a.engagement, "by_platform": a.by_platform,
                            "cite": a.cite()} for a in self.agents[:top]],
            "interactions": [{"from": f"@{e.source}", "to": f"@{e.target}", "kind": e.kind,
                              "platform": e.platform, "count": e.count}
                             for e in [e for e in self.interactions if e.during_run][:top * 3]],
        }


def _short(d: dict[str, Any], limit: int = 280) -> dict[str, Any]:
    if isinstance(d.get("content"), str) and len(d["content"]) > limit:
        d["content"] = d["content"][:limit] + "…"
    return d


def _platform_stats(sim_dir: Path, platform: str):
    conn = connect(platform_db(sim_dir, platform))
    try:
        names = users(conn)

        def who(user_id: int) -> tuple[int, str]:
            return names.get(user_id, (user_id, f"user{user_id}"))

        # Rounds and mix: the log when present, else the trace table.
        rounds: Counter = Counter()
        mix: Counter = Counter()
        acted: Counter = Counter()   # agent_id -> actions
        source = "none"
        post_round: dict[int, int] = {}
        log_path = actions_log(sim_dir, platform)
        # follow ids agents made during the run: the log knows (None: no log, no way to tell)
        run_follows: set[int] | None = set() if log_path.exists() else None
        log_rows, rounds_done, skipped = read_log(log_path)
        if log_rows:
            source = "log"
            assert run_follows is not None  # rows come from an existing log
            for row in log_rows:
                if not is_action(row["action"]):
                    continue
                info = row.get("info")
                if isinstance(info, dict) and isinstance(made := info.get(POST_MADE.get(row["action"], "")), int):
                    post_round[made] = row["round"]   # when it was written, not when it was last liked
                if row["action"] == "follow" and isinstance(info, dict) and isinstance(info.get("follow_id"), int):
                    run_follows.add(info["follow_id"])
                rounds[row["round"]] += 1
                mix[row["action"]] += 1
                if row.get("agent_id") is not None:
                    acted[int(row["agent_id"])] += 1
            for line in read_injected(sim_dir, [platform]):
                if line.post_id is not None:
                    post_round[line.post_id] = line.round - 1
        else:
            for r in conn.execute("SELECT user_id, created_at, action FROM trace"):
                if not is_action(r["action"]):
                    continue
                mix[r["action"]] += 1
                acted[who(r["user_id"])[0]] += 1
                if str(r["created_at"]).isdigit():
                    rounds[int(r["created_at"])] += 1
                    source = "trace"
            rounds_done = max(rounds, default=-1) + 1

        comments = Counter(r[0] for r in conn.execute("SELECT post_id FROM comment"))
        posts: dict[int, PostStat] = {}
        shares: list[tuple[int, int, str]] = []   # (sharer, original post, kind)
        for r in conn.execute("SELECT post_id, user_id, original_post_id, content, quote_content,"
                              " created_at, num_likes, num_dislikes FROM post"):
            if r["original_post_id"] is not None:
                shares.append((r["user_id"], r["original_post_id"],
                               "quote" if r["quote_content"] is not None else "repost"))
                if r["quote_content"] is None:
                    continue  # a plain repost carries no words of its own
            agent_id, name = who(r["user_id"])
            created = str(r["created_at"])
            posts[r["post_id"]] = PostStat(
                platform, r["post_id"], agent_id, name,
                r["quote_content"] if r["quote_content"] is not None else (r["content"] or ""),
                likes=r["num_likes"] or 0, dislikes=r["num_dislikes"] or 0,
                comments=comments.get(r["post_id"], 0),
                round=post_round.get(r["post_id"], int(created) if created.isdigit() else None))
        for _, original, _ in shares:
            if original in posts:
                posts[original].reposts += 1

        authors = {pid: p.author_id for pid, p in posts.items()}
        edges: Counter = Counter()
        for table, kind in (("like", "like"), ("dislike", "dislike"), ("comment", "comment")):
            for r in conn.execute(f"SELECT user_id, post_id FROM '{table}'"):
                if r["post_id"] in authors:
                    edges[(who(r["user_id"])[0], authors[r["post_id"]], kind)] += 1
        for sharer, original, kind in shares:
            if original in authors:
                edges[(who(sharer)[0], authors[original], kind)] += 1
        for r in conn.execute("SELECT follow_id, follower_id, followee_id FROM follow"):
            # without a log, a seeded follow cannot be told from one made in the run
            seeded = run_follows is not None and r["follow_id"] not in run_follows
            edges[(who(r["follower_id"])[0], who(r["followee_id"])[0], SEEDED_FOLLOW if seeded else "follow")] += 1
        agent_names = {aid: name for aid, name in names.values()}
        for rnd in range(rounds_done):   # quiet rounds count as rounds with no actions
            rounds.setdefault(rnd, 0)
        return rounds, mix, acted, source, list(posts.values()), edges, agent_names, skipped
    finally:
        conn.close()


def compute_stats(sim_dir: Path | str) -> SimStats:
    """Everything the report needs to know about a run, from its databases and logs (blocking)."""
    sim_dir = Path(sim_dir)
    platforms = platforms_of(sim_dir)
    rounds, mix, sources, skipped = {}, {}, {}, {}
    posts: list[PostStat] = []
    agents: dict[int, AgentStat] = {}
    interactions: list[Interaction] = []
    for platform in platforms:
        r, m, acted, source, p_posts, edges, names, skipped[platform] = _platform_stats(sim_dir, platform)
        rounds[platform], mix[platform], sources[platform] = dict(r), dict(m.most_common()), source
        posts += p_posts

        def agent(aid: int) -> AgentStat:   # called within this iteration only
            if aid not in agents:
                agents[aid] = AgentStat(aid, names.get(aid, f"agent{aid}"))  # noqa: B023
            return agents[aid]

        for aid in names:
            agent(aid)
        for aid, n in acted.items():
            a = agent(aid)
            a.actions += n
            a.by_platform[platform] = a.by_platform.get(platform, 0) + n
        for post in p_posts:
            a = agent(post.author_id)
            a.posts += 1
            a.engagement += post.engagement
        for (src, dst, kind), n in edges.items():
            if src != dst:
                interactions.append(Interaction(platform, src, agent(src).name, dst, agent(dst).name, kind, n))
    posts.sort(key=lambda p: (-p.engagement, -p.likes, p.platform, p.post_id))
    ranked = sorted(agents.values(), key=lambda a: (-(a.actions + a.engagement), a.agent_id))
    interactions.sort(key=lambda e: (-e.count, e.platform, e.source_id, e.target_id, e.kind))
    return SimStats(platforms, rounds, mix, posts, ranked, interactions, sources, skipped,
                    injected_events(sim_dir, platforms))
