"""camel-oasis set up to run offline and quietly inside the run's child process.

Import this module only in the child: importing oasis creates ``./log`` in the working
directory and configures loggers, so the child first changes into the simulation folder and
calls ``quiet_logging`` (see ``main``).
"""
from __future__ import annotations

import csv
import json
import logging
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from engine.sim.environment.models import REDDIT_PROFILES, TWITTER_PROFILES, PlatformConfig, SimulationConfig
from engine.sim.run.schedule import language_note, stance_note

# Recommenders that work without a model hub. "twhin-bert" downloads Twitter/twhin-bert-base and
# "twitter" crashes in camel-oasis 0.2.5 once posts exceed max_rec_post_len.
OFFLINE_RECSYS = ("random", "reddit")


def quiet_logging(level: str = "WARNING") -> None:
    """Route every log record to stderr before camel configures the root logger onto stdout."""
    os.environ.setdefault("CAMEL_LOGGING_LEVEL", level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def quiet_oasis_loggers(level: str = "WARNING") -> None:
    """oasis sets its own loggers to DEBUG with a file handler each (full prompts): raise them."""
    for name in ("social.agent", "social.twitter", "social.rec", "oasis.env", "camel"):
        logging.getLogger(name).setLevel(level)


def make_token_counter():
    from camel.utils import BaseTokenCounter

    class CharTokenCounter(BaseTokenCounter):
        """About four characters per token: enough for camel's context budget, and it never
        downloads a tiktoken encoding (camel's default counter does, per agent)."""

        def count_tokens_from_messages(self, messages) -> int:
            total = 0
            for m in messages:
                content = m.get("content") or ""
                if not isinstance(content, str):
                    content = json.dumps(content, default=str)
                total += 4 + len(content) // 4 + len(json.dumps(m.get("tool_calls") or "")) // 4
            return total

        # A "token" is a run of up to four characters, packed into one integer.
        def encode(self, text: str) -> list[int]:
            data = text.encode("utf-8")
            return [int.from_bytes(data[i:i + 4], "big") << 3 | len(data[i:i + 4])
                    for i in range(0, len(data), 4)]

        def decode(self, token_ids: list[int]) -> str:
            data = b"".join((t >> 3).to_bytes(t & 7, "big") for t in token_ids)
            return data.decode("utf-8", errors="replace")

    return CharTokenCounter()


def make_model(base_url: str, model: str, api_key: str, timeout_s: float, context_tokens: int,
               seed: int | None = None):
    """camel reads ``max_tokens`` of the config as the context budget of an agent's memory; ``seed``
    goes with every request as the model's sampling seed (OpenAI's ``seed``: the runs of an
    ensemble sample differently, a run resumed or repeated alike, where the model honours it)."""
    from camel.models import ModelFactory
    from camel.types import ModelPlatformType

    config: dict = {"max_tokens": context_tokens}
    if seed is not None:
        config["seed"] = seed
    return ModelFactory.create(
        ModelPlatformType.OPENAI_COMPATIBLE_MODEL, model,
        model_config_dict=config,
        url=base_url, api_key=api_key, timeout=timeout_s, token_counter=make_token_counter())


def estimate_tokens(messages: list[dict], response) -> tuple[int, int]:
    """Prompt and completion tokens of an answer without usage figures (some local servers omit
    them): about 4 characters per token, as the bot's LLM client estimates them."""
    sent = sum(len(json.dumps(m.get("content") or "", default=str)) for m in messages)
    message = response.choices[0].message if getattr(response, "choices", None) else None
    got = len(message.content or "") if message is not None else 0
    for call in (message.tool_calls or []) if message is not None else []:
        got += len(call.function.name) + len(call.function.arguments or "")
    return sent // 4, got // 4


class UsageMeter:
    """Counts the requests and tokens of a camel model backend (every agent shares it);
    ``on_call`` sees the totals after each answered request."""

    def __init__(self, model, on_call: Callable[[dict[str, int]], None] | None = None):
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        arun = model.arun

        async def counted(messages, *args, **kwargs):
            response = await arun(messages, *args, **kwargs)
            self.calls += 1
            usage = getattr(response, "usage", None)
            if usage is not None:
                self.prompt_tokens += usage.prompt_tokens or 0
                self.completion_tokens += usage.completion_tokens or 0
            else:
                prompt, completion = estimate_tokens(messages, response)
                self.prompt_tokens += prompt
                self.completion_tokens += completion
            if on_call is not None:
                on_call(self.snapshot())
            return response

        model.arun = counted

    def snapshot(self) -> dict[str, int]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


def make_clock(cfg: SimulationConfig):
    """A clock on simulated time, moved by the runner: ``at(round, substep)``.

    oasis stamps Twitter rows with ``time_step`` (here: simulated seconds since the start) and
    Reddit rows with ``time_transfer`` (here: the simulated datetime). Each env step of a round
    gets its own second, because oasis's trace table has the time in its primary key: an agent
    stepping twice in one round would otherwise fail to record its second feed refresh and
    be shown an empty feed.
    """
    from oasis.clock.clock import Clock

    minutes = cfg.time.minutes_per_round

    class RoundClock(Clock):
        def at(self, round_no: int, substep: int) -> None:
            self.time_step = round_no * minutes * 60 + substep

        def time_transfer(self, now_time: datetime, start_time: datetime) -> datetime:
            return start_time + timedelta(seconds=self.time_step)

    return RoundClock(1)


def sim_start_time(cfg: SimulationConfig) -> datetime:
    return cfg.time.round_start(0)


def make_platform(name: str, pcfg: PlatformConfig, db_path: Path, cfg: SimulationConfig):
    from oasis import Platform
    from oasis.social_platform.channel import Channel

    if pcfg.recsys not in OFFLINE_RECSYS:
        raise ValueError(f"{name}: recommender {pcfg.recsys!r} is not usable offline; "
                         f"use one of {', '.join(OFFLINE_RECSYS)}")
    platform = Platform(
        db_path=str(db_path), channel=Channel(), sandbox_clock=make_clock(cfg),
        start_time=sim_start_time(cfg), show_score=pcfg.show_score,
        allow_self_rating=pcfg.allow_self_rating, recsys_type=pcfg.recsys,
        refresh_rec_post_count=pcfg.refresh_rec_post_count, max_rec_post_len=pcfg.max_rec_post_len,
        following_post_count=pcfg.following_post_count)
    cap_feed_comments(platform, pcfg.comments_per_post)
    return platform


def cap_feed_comments(platform, per_post: int) -> None:
    """Show each feed post with its newest ``per_post`` comments and how many it has in all
    (``num_comments``), as a timeline shows a few replies under a post.

    oasis attaches every comment of every feed post to the agent's prompt. In a crowd that
    grows without bound: at 1,000 agents a round-2 feed was a median 12,680 tokens (bench_run.py,
    bench/RESULTS.md), past an agent's context window, so camel cut it into chunks and each round
    took longer than the one before (213 s, then 638 s). Comments come in id order, so the last
    ones are the newest."""
    attach = platform.pl_utils._add_comments_to_posts

    def capped(rows):
        posts = attach(rows)
        for post in posts:
            comments = post["comments"]
            if len(comments) > per_post:
                post["comments"] = comments[-per_post:]
                post["num_comments"] = len(comments)
        return posts

    platform.pl_utils._add_comments_to_posts = capped


def seed_follows(platform, edges: list[tuple[int, int]]) -> int:
    """Write follower -> followee edges (agent ids, which oasis uses as user ids) into the platform's
    database in one transaction, as oasis's ``follow`` action writes each: a ``follow`` row, both
    users' counts, a ``trace`` row with its follow id. Returns how many were written.

    Not through the agents' channel: there each edge costs a scan of the unindexed ``follow`` table
    and four commits, and every edge still waiting polls the channel every 0.1 s, copying the keys
    of every pending reply; 1,000 agents' 20,000 edges per platform did not finish in 9 minutes.
    """
    from oasis.social_platform.typing import ActionType, RecsysType

    if platform.recsys_type == RecsysType.REDDIT:
        now = platform.sandbox_clock.time_transfer(datetime.now(), platform.start_time)
    else:
        now = platform.sandbox_clock.get_time_step()
    db = platform.db
    with db:   # one transaction
        cur = db.cursor()
        for follower, followee in edges:
            cur.execute("INSERT INTO follow (follower_id, followee_id, created_at) VALUES (?, ?, ?)",
                        (follower, followee, now))
            cur.execute("INSERT INTO trace (user_id, created_at, action, info) VALUES (?, ?, ?, ?)",
                        (follower, now, ActionType.FOLLOW.value, json.dumps({"follow_id": cur.lastrowid})))
        cur.executemany("UPDATE user SET num_followings = num_followings + 1 WHERE user_id = ?",
                        [(follower,) for follower, _ in edges])
        cur.executemany("UPDATE user SET num_followers = num_followers + 1 WHERE user_id = ?",
                        [(followee,) for _, followee in edges])
    return len(edges)


def load_profiles(folder: Path, platform: str) -> list[dict[str, Any]]:
    if platform == "twitter":
        with open(folder / TWITTER_PROFILES, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    return json.loads((folder / REDDIT_PROFILES).read_text(encoding="utf-8"))


def make_agent_graph(cfg: SimulationConfig, folder: Path, platform: str, model):
    """One SocialAgent per profile row (row index = agent_id = oasis user_id).

    Every agent is signed up on both platforms because oasis's recommenders index users by
    position; only agents whose ``platforms`` include this one are ever scheduled to act here.
    Each profile gets the agent's stance on the simulated topic and the language it writes in
    (its posts, comments and interview answers): oasis puts the profile in the agent's system prompt.
    """
    from oasis import ActionType, AgentGraph, SocialAgent, UserInfo

    rows = load_profiles(folder, platform)
    if len(rows) != len(cfg.agents):
        raise ValueError(f"{platform} profiles have {len(rows)} rows for {len(cfg.agents)} agents")
    actions = (ActionType.get_default_twitter_actions() if platform == "twitter"
               else ActionType.get_default_reddit_actions())
    graph = AgentGraph()
    for agent_cfg, row in zip(sorted(cfg.agents, key=lambda a: a.agent_id), rows):
        note = stance_note(cfg, agent_cfg) + language_note(cfg)
        if platform == "twitter":
            other = {"user_profile": f"{row['user_char']}{note}"}
            info = UserInfo(user_name=row["username"], name=agent_cfg.name, description=row["description"],
                            profile={"other_info": other}, recsys_type="twitter")
        else:
            other = {"user_profile": f"{row['persona']}{note}", "mbti": row.get("mbti", ""),
                     "gender": row.get("gender", ""), "age": row.get("age", ""),
                     "country": row.get("country", "")}
            info = UserInfo(user_name=row["username"], name=agent_cfg.name, description=row["bio"],
                            profile={"other_info": other}, recsys_type="reddit")
        graph.add_agent(SocialAgent(agent_id=agent_cfg.agent_id, user_info=info, model=model,
                                    agent_graph=graph, available_actions=actions))
    return graph


# -- agent memory ---------------------------------------------------------------------------

def _storage(agent):
    # camel's ChatHistoryMemory keeps its records in a key-value storage of plain dicts; its own
    # clean_tool_calls edits the same storage.
    return agent.memory._chat_history_block.storage


def trim_memory(agent, keep_rounds: int) -> int:
    """Keep the system message and the records from the last ``keep_rounds`` user messages on.

    Every LLM step starts with one user message (the observed timeline) followed by the
    assistant's tool call and the tool result, so cutting just before a user message never
    separates a tool result from its call. Returns how many records were dropped.
    """
    storage = _storage(agent)
    records = storage.load()
    users = [i for i, r in enumerate(records) if r.get("role_at_backend") == "user"]
    if len(users) <= keep_rounds:
        return 0
    cut = users[-keep_rounds] if keep_rounds > 0 else len(records)
    head = records[:1] if records and records[0].get("role_at_backend") == "system" else []
    kept = head + records[cut:]
    storage.clear()
    storage.save(kept)
    return len(records) - len(kept)


def dump_memories(graph) -> dict[str, list[dict]]:
    return {str(aid): _storage(agent).load() for aid, agent in graph.get_agents()}


def restore_memories(graph, saved: dict[str, list[dict]]) -> int:
    """Replace each agent's memory with its saved records; returns how many agents were restored."""
    restored = 0
    for aid, agent in graph.get_agents():
        records = saved.get(str(aid))
        if records is None:
            continue
        storage = _storage(agent)
        storage.clear()
        storage.save(records)
        restored += 1
    return restored
