"""The platforms the run's child builds (``oasis_setup``), each in a fresh interpreter inside a
scratch folder, as in the run's child (importing oasis writes ``./log``):
- the seeded follow graph (``seed_follows``): the same rows as oasis's own ``follow`` action writes
  through the agents' channel, and a crowd's graph seeded at once. Through the channel, 1,000
  agents' 20,000 edges per platform never finished (a table scan and four commits per edge, every
  waiting edge polling the channel);
- the feed (``cap_feed_comments``): a post shows its newest comments only, and how many it has."""
from __future__ import annotations

from tests.helpers.probe import probe_json

PROBE = """
import asyncio, json, sqlite3, sys, time
from pathlib import Path
from engine.sim.run.child.oasis_import import load_oasis
load_oasis()
from oasis.social_agent.agent_action import SocialAction
from engine.sim.run.child import oasis_setup
from engine.sim.run.schedule import follow_edges
from tests.helpers.sim import make_sim_folder

def rows(db):
    conn = sqlite3.connect(db)
    out = {"follow": conn.execute("SELECT follower_id, followee_id, created_at FROM follow ORDER BY 1, 2").fetchall(),
           "users": conn.execute("SELECT user_id, num_followings, num_followers FROM user ORDER BY 1").fetchall(),
           "trace": conn.execute("SELECT t.user_id, t.created_at, f.followee_id FROM trace t JOIN follow f"
                                 " ON f.follow_id = json_extract(t.info, '$.follow_id')"
                                 " WHERE t.action = 'follow' ORDER BY 1, 3").fetchall()}
    conn.close()
    return out

async def seeded(name, agents, through_channel):
    folder = Path(f"{name}{agents}{through_channel}")
    cfg = make_sim_folder(folder, agents=agents, everyone_everywhere=True)
    db = folder / "p.db"
    platform = oasis_setup.make_platform(name, getattr(cfg, name), db, cfg)
    platform.sandbox_clock.at(0, 0)
    task = asyncio.create_task(platform.running())
    await asyncio.gather(*(SocialAction(a.agent_id, platform.channel).sign_up(a.username, a.name, "bio")
                           for a in cfg.agents))
    edges = follow_edges(cfg, name, 0.2)
    t0 = time.perf_counter()
    if through_channel:
        await asyncio.gather(*(SocialAction(f, platform.channel).follow(e) for f, e in edges))
    else:
        assert oasis_setup.seed_follows(platform, edges) == len(edges)
    took = time.perf_counter() - t0
    await platform.channel.write_to_receive_queue((None, None, "exit"))
    await task
    return rows(db), len(edges), took

async def main():
    out = {}
    for name in ("twitter", "reddit"):
        ours, n, _ = await seeded(name, 12, False)
        theirs, _, _ = await seeded(name, 12, True)
        crowd, edges, took = await seeded(name, 1000, False)
        out[name] = {"same": ours == theirs, "edges": n, "follows": len(ours["follow"]),
                     "crowd_edges": edges, "crowd_rows": len(crowd["follow"]), "crowd_traces": len(crowd["trace"]),
                     "crowd_s": took}
    print(json.dumps(out))

asyncio.run(main())
"""


def test_seeded_follows_match_oasis_and_scale_to_a_crowd(tmp_path):
    result = probe_json(PROBE, cwd=tmp_path)
    for platform in ("twitter", "reddit"):
        r = result[platform]
        assert r["same"], platform       # follow rows, both users' counts and trace rows as oasis writes them
        assert r["follows"] == r["edges"] > 0
        # 1,000 agents: about 20 followees each, every edge written; seconds, where the channel took hours
        assert r["crowd_edges"] > 15_000 and r["crowd_rows"] == r["crowd_traces"] == r["crowd_edges"]
        assert r["crowd_s"] < 30, r


FEED = """
import asyncio, json
from pathlib import Path
from engine.sim.run.child.oasis_import import load_oasis
load_oasis()
from oasis.social_agent.agent_action import SocialAction
from engine.sim.run.child import oasis_setup
from tests.helpers.sim import make_sim_folder

async def feed(name):
    folder = Path(name)
    cfg = make_sim_folder(folder, agents=4, everyone_everywhere=True)
    pcfg = getattr(cfg, name).model_copy(update={"comments_per_post": 3})
    platform = oasis_setup.make_platform(name, pcfg, folder / "p.db", cfg)
    platform.sandbox_clock.at(0, 0)
    task = asyncio.create_task(platform.running())
    act = {a.agent_id: SocialAction(a.agent_id, platform.channel) for a in cfg.agents}
    for a in cfg.agents:
        await act[a.agent_id].sign_up(a.username, a.name, "bio")
    crowded = (await act[1].create_post("the bridge closes on Monday"))["post_id"]
    quiet = (await act[2].create_post("the market opens late"))["post_id"]
    for i in range(7):
        platform.sandbox_clock.at(0, i + 1)
        await act[2 + i % 2].create_comment(crowded, f"comment {i}")
    await act[3].create_comment(quiet, "only comment")
    await platform.update_rec_table()
    seen = await act[0].refresh()
    await platform.channel.write_to_receive_queue((None, None, "exit"))
    await task
    return {p["content"]: {"comments": [c["content"] for c in p["comments"]], "num": p.get("num_comments")}
            for p in seen["posts"]}

async def main():
    print(json.dumps({name: await feed(name) for name in ("twitter", "reddit")}))

asyncio.run(main())
"""


def test_a_feed_post_shows_its_newest_comments_and_how_many_it_has(tmp_path):
    result = probe_json(FEED, cwd=tmp_path)
    for platform in ("twitter", "reddit"):
        posts = result[platform]
        assert posts["the bridge closes on Monday"] == {"comments": ["comment 4", "comment 5", "comment 6"],
                                                        "num": 7}, platform
        assert posts["the market opens late"] == {"comments": ["only comment"], "num": None}, platform
