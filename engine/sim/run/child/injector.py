"""Injected events inside the run's child: publish them on time and make sure agents see them.

At the start of each round the runner asks its ``Injector`` for the events of
``injections.json`` that are due on its platform (their round has come and they were not
published yet) and publishes each as a post of its source account, with the round's sandbox
time. The source account is a user row of the platform's database, signed up once per name
(marked by ``SOURCE_BIO``), never an LLM agent.

A post in the database is not enough for every agent to see it: oasis's refresh shows each
agent a random sample of ``refresh_rec_post_count`` posts of the recommendation table (Twitter's
random recommender and Reddit's hot-score one alike), so a post can stay unseen for rounds.
The injector therefore also puts the event into what the agent observes: every agent's
environment text starts with a "Breaking news" line for each event published so far on its
platform (the latest ``NEWS_LINES``), from the round it went out on.

Published events are known from the platform's ``actions.jsonl`` (its ``injected`` lines), so a
resumed run, whose log was cut back to its checkpoint, publishes what the checkpoint lacked and
nothing twice.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from engine.sim.run.injections import Injection, published_lines, read_injections
from engine.sim.run.output import INJECTED

SOURCE_BIO = "Source account of injected events (not an agent of the simulation)"
NEWS_LINES = 3  # events repeated in every prompt at most (the latest ones)


def source_username(source: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", source.lower()).strip("_") or "source"


class Injector:
    """One platform's injected events."""

    def __init__(self, folder: Path, platform: str):
        self.folder, self.platform = Path(folder), platform
        self.events: list[Injection] = []
        self.published: list[dict] = []   # the ``injected`` lines of this platform, in order

    def load_published(self) -> None:
        """What the platform's log (already cut back to its checkpoint) says went out."""
        self.published = published_lines(self.folder, self.platform)

    def reload(self) -> None:
        """Read the file again; a broken file keeps the events last read (and says so in run.log)."""
        try:
            self.events = read_injections(self.folder)
        except (OSError, ValueError) as err:
            print(f"{self.platform}: injections not re-read: {err}", file=sys.stderr)

    def due(self, round_no: int) -> list[Injection]:
        """Events for this platform whose round (1-based) is ``round_no + 1`` or earlier, not yet
        published: an event that came in after its round had started goes out one round late."""
        done = {e["id"] for e in self.published}
        return [e for e in self.events
                if self.platform in e.platforms and e.round <= round_no + 1 and e.id not in done]

    async def publish(self, platform, clock, round_no: int) -> list[dict]:
        """Post every due event by its source account at the start of round ``round_no`` (0-based);
        returns the ``injected`` lines (without platform and time, which the runner adds)."""
        self.reload()
        lines = []
        for event in self.due(round_no):
            clock.at(round_no, 0)
            user_id = await self._source_user(platform, event.source)
            result = await platform.create_post(user_id, event.text)
            if not result.get("success"):
                print(f"{self.platform}: injected event {event.id} not posted: {result}", file=sys.stderr)
                continue
            line = {"type": INJECTED, "round": round_no, "id": event.id, "source": event.source,
                    "text": event.text, "asked_by": event.asked_by, "post_id": result["post_id"],
                    "requested_round": event.round}
            self.published.append(line)
            lines.append(line)
        return lines

    @staticmethod
    async def _source_user(platform, source: str) -> int:
        row = platform.db.execute("SELECT user_id FROM user WHERE name = ? AND bio = ?",
                                  (source, SOURCE_BIO)).fetchone()
        if row is not None:
            return row[0]
        # the next id: oasis's recommenders index users by position, so ids stay consecutive
        user_id = platform.db.execute("SELECT coalesce(max(user_id), -1) + 1 FROM user").fetchone()[0]
        result = await platform.sign_up(user_id, (source_username(source), source, SOURCE_BIO))
        if not result.get("success"):
            raise RuntimeError(f"the source account {source!r} could not be created: {result}")
        return user_id

    def news(self) -> str:
        """The "Breaking news" lines every agent of this platform reads before its feed."""
        return "".join(f"Breaking news (round {e['round'] + 1}) from {e['source']}: {e['text']}\n"
                       for e in self.published[-NEWS_LINES:])

    def install(self, graph) -> None:
        """Put ``news()`` in front of every agent's observed environment."""
        for _, agent in graph.get_agents():
            observe = agent.env.to_text_prompt

            async def with_news(*args, _observe=observe, **kwargs) -> str:
                return self.news() + await _observe(*args, **kwargs)

            agent.env.to_text_prompt = with_news
