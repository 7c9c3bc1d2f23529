"""Belief extraction cost on a team chat typed into the console: LLM calls and input tokens per message.

A generated 500-message team chat (eight topics in runs, small talk, facts and later
corrections of them) is typed into one console channel of a real `python -m bot` process
(piped stdin, default memory settings) whose LLM is a fake OpenAI endpoint served by this
process. The fake answers extraction calls with the chat's known facts and reports no usage,
so the tokens are the ones our LLM client counts itself (4 characters a token over the messages
sent). Figures come from the bot's own `llm_usage` table (job ``memory.extract``) once every
message has been read for beliefs (the last partial batch waits for ``extract_every_s``).

    python -m bench.extraction [--messages 500] [--seed 7] [--pace-ms 0] [--repo /other/checkout]

``--repo`` runs the bot of another checkout (e.g. the main branch) for a before/after.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import REPO, bot_env  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, completion  # noqa: E402

# (subject, predicate, exclusive, values in the order the chat settles on them, phrasings)
FACTS = [
    ("the release", "is on", True, ["friday", "monday", "wednesday"],
     ["the release is on {v}", "heads up, release moved to {v}", "so we ship the release {v}?"]),
    ("the offsite", "is in", True, ["lisbon", "porto"],
     ["the offsite is in {v} this year", "update: offsite moved to {v}", "booked my flight for the {v} offsite"]),
    ("standup", "is at", True, ["9:30", "10:00"],
     ["standup is at {v} from now on", "reminder, standup at {v}", "moving standup to {v}, ok?"]),
    ("on-call this week", "is", True, ["ben", "chloe"],
     ["{v} is on-call this week", "swap: {v} takes on-call this week", "pager goes to {v} this week"]),
    ("postgres", "version is", True, ["15", "16"],
     ["prod postgres is version {v}", "we upgraded postgres to {v} last night", "postgres {v} everywhere now"]),
    ("friday lunch", "is at", True, ["the ramen bar", "the taco place"],
     ["friday lunch is at {v}", "change of plan, friday lunch at {v}", "table booked at {v} for friday lunch"]),
    ("dana", "joins", False, ["the backend team"],
     ["dana joins {v} next month", "welcome dana to {v}!"]),
    ("the design review", "needs", False, ["the new mockups"],
     ["the design review needs {v}", "don't forget {v} for the design review"]),
]
CHATTER = {
    "release": ["the staging deploy failed on the migration again", "rollback of the payments service is done",
                "the pipeline needs a new docker image", "who is reviewing the hotfix PR",
                "kubernetes pods keep restarting after the deploy", "release notes draft is in the doc"],
    "offsite": ["does the hotel have a pool", "train or flight between the cities?",
                "the agenda has a boat trip", "remember your passport", "who shares a room with whom"],
    "standup": ["standup ran long today", "let's keep updates to one minute each",
                "async standup notes in the thread please"],
    "oncall": ["the pager went off twice last night", "disk alert on the db host again",
               "runbook for the queue backlog is outdated", "silenced the flaky cpu alert"],
    "database": ["vacuum is taking forever on the events table", "index on user_id made the query 10x faster",
                 "replication lag spiked during the backup", "read replica is back in sync"],
    "lunch": ["anyone want sushi today", "the new cafe downstairs has good sandwiches",
              "bring cake for the birthday", "pizza order is vegetarian this time"],
    "hiring": ["two backend candidates this week", "interview loop for the designer on thursday",
               "offer letter went out to the data engineer", "recruiter sent three new profiles"],
    "design": ["mockups for the settings page are in figma", "dark mode colours need more contrast",
               "the onboarding flow has too many steps", "icons look blurry on windows"],
}
SMALL_TALK = ["ok", "lol", "thanks!", "sounds good", "+1", "brb", "nice", "haha yes", "on it", "agreed",
              "morning all", "coffee first", "ugh mondays", "see you tomorrow"]
TOPIC_OF_FACT = ["release", "offsite", "standup", "oncall", "database", "lunch", "hiring", "design"]


def team_chat(n: int, seed: int) -> tuple[list[str], dict[str, tuple[str, str, str, bool]]]:
    """n chat lines in runs of one topic at a time, and line -> the fact it states.
    Each fact's values come in order over the chat, so later lines correct earlier ones."""
    rng = random.Random(seed)
    lines: list[str] = []
    facts: dict[str, tuple[str, str, str, bool]] = {}
    # When each fact's next value is stated: its values spread over the chat in order.
    schedule = []
    for f, (_, _, _, values, _) in enumerate(FACTS):
        for k, _ in enumerate(values):
            for _ in range(2):  # each value said (or repeated) about twice
                schedule.append(((k + rng.random()) / len(values), f, k))
    schedule.sort()
    due = iter(schedule)
    nxt = next(due, None)
    while len(lines) < n:
        topic = rng.choice(list(CHATTER))
        for _ in range(rng.randint(3, 8)):
            if len(lines) >= n:
                break
            if nxt is not None and nxt[0] <= len(lines) / n:
                _, f, k = nxt
                subject, predicate, exclusive, values, phrasings = FACTS[f]
                line = rng.choice(phrasings).format(v=values[k])
                facts[line] = (subject, predicate, values[k], exclusive)
                nxt = next(due, None)
            elif rng.random() < 0.2:
                line = rng.choice(SMALL_TALK)
            else:
                line = rng.choice(CHATTER[topic])
            lines.append(line)
    return lines, facts


def responder(facts: dict[str, tuple[str, str, str, bool]]):
    def answer(body: dict):
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith("You extract durable facts"):
            beliefs = []
            for number, text in re.findall(r"^\[(\d+)\] [^:]+: (.*)$", user, re.M):
                if text in facts:
                    s, p, o, exclusive = facts[text]
                    beliefs.append({"subject": s, "predicate": p, "object": o, "confidence": 0.9,
                                    "exclusive": exclusive, "sources": [int(number)]})
            content = json.dumps({"beliefs": beliefs})
        elif "name chat topics" in system:
            content = json.dumps({"name": "team chat"})
        else:
            content = "ok"
        reply = completion(content)
        del reply["usage"]  # our client counts the tokens itself
        return reply
    return answer


def read(db: Path, sql: str, args: tuple = ()):
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, args).fetchone()
    except sqlite3.OperationalError:  # tables not created yet
        return None
    finally:
        conn.close()


def run(lines: list[str], facts, repo: Path, timeout_s: float, pace_s: float = 0.0) -> dict:
    with FakeOpenAI(responder(facts)) as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cfg = folder / "config.toml"
        cfg.write_text(f'[bot]\ndata_dir = "data"\n[llm]\nbase_url = "{server.base_url}"\nmodel = "fake-model"\n')
        db = folder / "data" / "bot.sqlite3"
        env = {**bot_env(), "PYTHONPATH": str(repo)}
        log = open(folder / "bot.log", "w")
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(cfg), "run"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=log, cwd=repo, env=env, text=True)
        assert proc.stdin is not None  # started with stdin=PIPE
        for line in lines:
            proc.stdin.write(line + "\n")
            if pace_s:
                proc.stdin.flush()
                time.sleep(pace_s)
        proc.stdin.flush()
        n = len(lines)
        while True:
            got = read(db, "SELECT count(*), sum(extracted=0) FROM memory_messages")
            if got and got[0] == n and got[1] == 0:
                break
            if proc.poll() is not None or time.monotonic() - started > timeout_s:
                raise SystemExit(f"the bot stopped or timed out with {got} messages stored/unread; see {log.name}")
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        proc.stdin.close()
        proc.wait(60)
        log.close()
        calls, prompt, completion_tokens = read(
            db, "SELECT sum(calls), sum(prompt_tokens), sum(completion_tokens) FROM llm_usage"
                " WHERE job='memory.extract'")
        beliefs, superseded = read(db, "SELECT count(*), sum(invalid_at IS NOT NULL) FROM beliefs")
        worlds = read(db, "SELECT count(*) FROM worlds")[0]
        invalid_before = read(db, "SELECT count(*) FROM beliefs"
                                  " WHERE invalid_at IS NOT NULL AND invalid_at < valid_from")[0]
        rejected = (folder / "bot.log").read_text().count("rejected a belief")
        return {"messages": n, "worlds": worlds, "extraction_calls": calls, "calls_per_message": round(calls / n, 3),
                "prompt_tokens": prompt, "prompt_tokens_per_message": round(prompt / n, 1),
                "completion_tokens": completion_tokens, "beliefs": beliefs, "superseded": superseded,
                "invalid_before_valid": invalid_before, "rejected": rejected, "seconds": round(elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose bot runs (default: this one)")
    parser.add_argument("--pace-ms", type=float, default=0.0, help="pause between typed lines (default: none)")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    lines, facts = team_chat(args.messages, args.seed)
    result = run(lines, facts, args.repo.resolve(), args.timeout, args.pace_ms / 1000)
    print(json.dumps({"repo": str(args.repo), "pace_ms": args.pace_ms, "fact_lines": len(facts), **result}))


if __name__ == "__main__":
    main()
