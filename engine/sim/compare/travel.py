"""How far an injected event travelled in a run: who saw its post, replied, reposted, liked.

Read from the platform's database (camel-oasis schema), for the post the injection wrote
(``Injected.post_id``):
- saw: agents whose refreshed feed held the post (``trace`` rows of action ``refresh``: oasis
  records the posts it showed; a repost shows as its original) plus everyone who engaged with
  it. A database without any feed record falls back to the recommendation table ``rec``
  (offered, not necessarily read), and without that to the agents who acted from the event's
  round on; ``seen_by`` says which of the three was used.
- replied: commented on it; reposted: reposted or quoted it; liked: liked it.
The source account itself is never counted.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.i18n import N_, _
from engine.sim.inject.logged import Injected
from engine.sim.run.output import actions_log, connect, is_action, platform_db, read_log, users

FEED, RECOMMENDED, ACTIVE = "feed", "recommendations", "activity"


@dataclass
class Travel:
    event: Injected
    saw: set[int] = field(default_factory=set)        # agent ids
    replied: set[int] = field(default_factory=set)
    reposted: set[int] = field(default_factory=set)
    liked: set[int] = field(default_factory=set)
    seen_by: str = FEED

    def counts(self) -> dict[str, int]:
        return {"saw": len(self.saw), "replied": len(self.replied), "reposted": len(self.reposted),
                "liked": len(self.liked)}

    def describe(self) -> str:
        """How far the event's post went, in the current language."""
        c = self.counts()
        how = {FEED: N_("in their feeds"), RECOMMENDED: N_("recommended to"), ACTIVE: N_("active after it")}
        return _("{platform}: seen by {saw} ({how}), {replied} replied, {reposted} reposted or quoted, {liked} liked",
                 platform=self.event.platform, how=_(how[self.seen_by]), **c)


def _shown(info: str, post_id: int) -> bool:
    try:
        posts = json.loads(info).get("posts") or []
    except (ValueError, AttributeError):
        return False
    return any(isinstance(p, dict) and p.get("post_id") == post_id for p in posts)


def event_travel(sim_dir: Path | str, event: Injected) -> Travel:
    """Who saw and engaged with the post of ``event`` on its platform (blocking)."""
    travel = Travel(event)
    path = platform_db(Path(sim_dir), event.platform)
    if event.post_id is None or not path.exists():
        return travel
    post_id = event.post_id
    conn = connect(path)
    try:
        agent = {user: agent_id for user, (agent_id, _) in users(conn).items()}
        source = conn.execute("SELECT user_id FROM post WHERE post_id = ?", (post_id,)).fetchone()

        def agents(sql: str) -> set[int]:
            return {agent.get(r[0], r[0]) for r in conn.execute(sql, (post_id,))
                    if source is None or r[0] != source[0]}

        travel.replied = agents("SELECT user_id FROM comment WHERE post_id = ?")
        travel.reposted = agents("SELECT user_id FROM post WHERE original_post_id = ?")
        travel.liked = agents("SELECT user_id FROM 'like' WHERE post_id = ?")
        engaged = travel.replied | travel.reposted | travel.liked
        if conn.execute("SELECT 1 FROM trace WHERE action = 'refresh' LIMIT 1").fetchone():
            travel.saw = {agent.get(r["user_id"], r["user_id"]) for r in conn.execute(
                "SELECT user_id, info FROM trace WHERE action = 'refresh' AND instr(info, ?) > 0", (str(post_id),))
                if _shown(r["info"], post_id) and (source is None or r["user_id"] != source[0])}
        elif conn.execute("SELECT 1 FROM rec LIMIT 1").fetchone():
            travel.saw, travel.seen_by = agents("SELECT user_id FROM rec WHERE post_id = ?"), RECOMMENDED
        else:
            actions, _, _ = read_log(actions_log(sim_dir, event.platform))
            source_agent = agent.get(source[0]) if source else None
            travel.saw = {a["agent_id"] for a in actions if a["round"] + 1 >= event.round
                          and is_action(a["action"]) and a.get("agent_id") not in (None, source_agent)}
            travel.seen_by = ACTIVE
        travel.saw |= engaged
        return travel
    finally:
        conn.close()
