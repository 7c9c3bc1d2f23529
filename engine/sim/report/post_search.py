"""The report agent's search over the simulation's posts: the memory engine's recall over the
simulation's scope (engine.sim.sim_memory), mapped back to the posts the report cites.

Recall ranks by meaning and by keywords at once (engine.memory.retrieval), so a post that says
the same thing in other words is found. A hit on a comment cites the post it answers (the report
cites posts: ``[reddit post 1]``) and carries the comment's own author and words. ``prepare``
feeds the whole run into the scope first (idempotent), so a simulation whose rounds were not
observed as they ended (run by an older version, or in another process) is searched the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.memory.sim_scopes import sim_scope
from engine.offload import run_cpu
from engine.sim.report.stats import PostStat, SimStats
from engine.sim.run.output import connect, platform_db, users
from engine.sim.sim_memory import ingest_run, parse_message_id

Comments = dict[tuple[str, int], tuple[int, str]]   # (platform, comment id) -> (post id, commenter)


@dataclass
class PostHit:
    post: PostStat     # the post cited
    author: str        # who wrote the matching words (a comment's author for a comment)
    text: str
    kind: str          # "post" or "comment"
    score: float


class PostSearch(Protocol):
    async def search(self, query: str, limit: int) -> list[PostHit]: ...


def load_comments(folder: Path, platforms: list[str]) -> Comments:
    """Which post each comment answers, and who wrote it, from the platforms' databases (blocking)."""
    out: Comments = {}
    for platform in platforms:
        path = platform_db(folder, platform)
        if not path.exists():
            continue
        conn = connect(path)
        try:
            names = users(conn)
            for r in conn.execute("SELECT comment_id, post_id, user_id FROM comment"):
                author = names.get(r["user_id"], (0, f"user{r['user_id']}"))[1]
                out[(platform, r["comment_id"])] = (r["post_id"], author)
        finally:
            conn.close()
    return out


class MemoryPostSearch:
    """Posts of one simulation found by recall over its memory scope."""

    def __init__(self, memory: MemoryEngine, sim_id: str, folder: Path, stats: SimStats):
        self.memory = memory
        self.sim_id = sim_id
        self.folder = Path(folder)
        self.posts = {(p.platform, p.post_id): p for p in stats.posts}
        self.platforms = list(stats.platforms)
        self.comments: Comments = {}

    async def prepare(self) -> int:
        """Feed the run into the scope (what is stored already is skipped); returns the messages added."""
        added = await ingest_run(self.memory, self.folder, self.sim_id)
        self.comments = await run_cpu(load_comments, self.folder, self.platforms)
        return added

    async def search(self, query: str, limit: int) -> list[PostHit]:
        result = await self.memory.recall(Viewer(sim_scope(self.sim_id)), query, limit * 2)
        hits: list[PostHit] = []
        seen: set[tuple[str, int, str]] = set()
        for e in result.evidence:
            if e.neighbour_of is not None:   # brought in as context for a hit, not a match itself
                continue
            hit = self._hit(e.message_id, e.text, e.score)
            if hit is not None and (key := (hit.post.platform, hit.post.post_id, hit.text)) not in seen:
                seen.add(key)
                hits.append(hit)
        return hits[:limit]

    def _hit(self, mid: str, text: str, score: float) -> PostHit | None:
        parsed = parse_message_id(mid)
        if parsed is None:
            return None
        platform, kind, number = parsed
        if kind == "comment":
            answered = self.comments.get((platform, number))
            if answered is None:
                return None
            post = self.posts.get((platform, answered[0]))
            return PostHit(post, answered[1], text, kind, score) if post else None
        post = self.posts.get((platform, number))
        return PostHit(post, post.author, text, kind, score) if post else None
