"""Synthetic group chats with known answer turns, and a 100k-message scope for recall latency.

``synthetic_dialogues``: group chats of several speakers over several channels and weeks.
Small talk (short chat lines, and chatterbot-corpus exchanges as on-topic distractors) is
interleaved with facts people state about themselves in the first person ("I just moved to
Porto"), later corrections of some of them ("the Porto flat fell through, I'm living in
Lyon now"), facts spread over three turns (an announcement, a friend's question, the
answer), and events told with a relative date ("ran a half marathon yesterday"). Questions
are asked in the third person with names and absolute dates, the way people ask a bot:

* ``fact``: "Where does Anna live?" (the fact's turn; asked of facts never corrected);
* ``correction``: "Where does Anna live now?" (the correcting turn);
* ``before``: "Where did Anna live before Lyon?" (the original turn);
* ``spread``: "When and where is Anna's sister getting married?" (announcement and answer);
* ``date``: "What did Anna do on 12 March 2024?" (the turn that said "yesterday" the day after).

A session is a day: session hit is a returned turn from the day of an evidence turn.

``python -m bench.recall_synth --messages 100000``: ONE scope of that many messages, then
recall latency p50/p95 over the generated questions at k 5 and 10, and the ingest time of
single new messages into that scope. The chats above (60 speakers, 8 channels, about 280 days)
are filled up with real two-person chats from chitchat-dataset (MIT, inside its PyPI package),
each posted by two of the speakers in one channel. Embedding 100k sentences with MiniLM takes
too long on this machine, so messages get vectors from a pool: a message's *template* is its
chitchat conversation, or its kind (small talk line, fact kind, correction, ...); about
``--pool`` sentences are really embedded, shared among templates in proportion to their
distinct texts (at least one each), and every other message takes the vector of a pool
sentence of its own template (chosen by a hash of its text) plus Gaussian noise (cosine about
0.96 to it). The messages are written through the product's storage path
(``MemoryEngine.ingest_many``: routing, worlds, full-text index, vectors) with that embedder;
queries and the single-message ingests are embedded for real. Relevance is not scored at 100k
(the vectors are approximations); latency is.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import chitchat_dataset
import numpy as np

from bench.corpus import ALL, load_conversations
from bench.recall_data import Dialogue, Question, Turn
from engine.config import load_config
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine, MemoryMessage

START = datetime(2024, 3, 4, 9, 0, tzinfo=timezone.utc)
NAMES = ("Anna", "Ben", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kofi", "Lena",
         "Mateo", "Nora", "Oskar", "Priya", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wim", "Yara")
SURNAMES = ("Berg", "Costa", "Dahl", "Esser", "Fox", "Grant", "Holm", "Ibsen", "Jung", "Khan")
CHANNELS = ("general", "random", "weekend", "work-chat", "pets", "travel", "music", "food")
CITIES = ("Porto", "Lyon", "Gdansk", "Valencia", "Bergen", "Ghent", "Leipzig", "Trieste", "Cork", "Tartu",
          "Bologna", "Malmo", "Utrecht", "Graz", "Brno", "Aarhus")
COMPANIES = ("Northwind", "Bluefin Labs", "Orchard Health", "Kestrel Bank", "Lumen Games", "Tidewater Energy",
             "Quarry Robotics", "Maple Insurance", "Harbor Logistics", "Juniper Media")
ROLES = ("a data analyst", "a product designer", "a nurse", "a site engineer", "a teacher", "a sous chef",
         "an accountant", "a translator")
ANIMALS = ("cat", "dog", "rabbit", "parrot", "tortoise")
PET_NAMES = ("Biscuit", "Pepper", "Mochi", "Ziggy", "Olive", "Nacho", "Luna", "Waffles", "Pixel", "Juno")
INSTRUMENTS = ("cello", "ukulele", "piano", "saxophone", "drums", "violin", "banjo")
COUNTRIES = ("Japan", "Portugal", "Iceland", "Mexico", "Vietnam", "Morocco", "Chile", "Greece", "Canada")
ACTIVITIES = ("ran a half marathon", "painted the kitchen ceiling", "went climbing at the quarry",
              "baked sourdough for the first time", "saw a jazz concert", "planted tomatoes on the balcony",
              "fixed my bike's gears", "visited the science museum", "played chess in the park",
              "went kayaking on the river")
SMALL_TALK = ("morning all", "haha", "lol same", "anyone up for lunch?", "ok", "thanks!", "brb", "nice",
              "what a week", "coffee time", "so tired today", "did anyone see the game?", "agreed",
              "the weather is awful again", "weekend plans anyone?", "that's hilarious", "true",
              "I can't believe it's already Thursday", "who's bringing snacks tomorrow?", "good night folks",
              "omg", "traffic was terrible this morning", "hmm not sure", "sounds good to me")
ACKS = ("nice, {name}!", "congrats {name}!", "oh cool", "wow, tell us more", "that's great news", "amazing")


def _pick(rng: random.Random, options, avoid=None):
    return rng.choice([o for o in options if o != avoid])


@dataclass
class Event:
    """Lines one speaker posts together (others may answer in between), and its questions."""
    day: int
    lines: list[tuple[str, str, str]]   # (speaker, text, template)
    questions: list[tuple[str, list[int], str]]   # (question, indexes into lines of its evidence, category)


def person_events(rng: random.Random, name: str, days: int, other) -> list[Event]:
    """The facts, corrections, spread facts and dated events of one speaker."""
    out: list[Event] = []

    def fact(state_line, question, corrected, now_question, before_question, kind):
        d1 = rng.randrange(0, max(1, days // 2))
        fact_event = Event(d1, [(name, state_line, kind)], [])
        out.append(fact_event)
        if corrected is None:
            fact_event.questions.append((question, [0], "fact"))
            return
        d2 = rng.randrange(d1 + 1, days)
        correction = Event(d2, [(name, corrected, kind + "-fix")], [(now_question, [0], "correction")])
        out.append(correction)
        fact_event.questions.append((before_question, [0], "before"))

    fixes = rng.random() < 0.5
    city = rng.choice(CITIES)
    city2 = _pick(rng, CITIES, city)
    fact(f"I just moved to {city}, the flat is tiny but I love it", f"Where does {name} live?",
         f"Update: the {city} flat fell through, I'm living in {city2} now" if fixes else None,
         f"Where does {name} live now?", f"Where did {name} live before {city2}?", "home")
    company, role = rng.choice(COMPANIES), rng.choice(ROLES)
    company2 = _pick(rng, COMPANIES, company)
    fixes = rng.random() < 0.5
    fact(f"Started my new job at {company} today, I'm {role} there", f"Where does {name} work?",
         f"I left {company}, been at {company2} since Monday" if fixes else None,
         f"Which company does {name} work for now?", f"Where did {name} work before {company2}?", "job")
    animal, pet = rng.choice(ANIMALS), rng.choice(PET_NAMES)
    pet2 = _pick(rng, PET_NAMES, pet)
    fixes = rng.random() < 0.4
    fact(f"We adopted a {animal} and called her {pet}", f"What is the name of {name}'s {animal}?",
         f"Small change: the {animal} is called {pet2} now, the kids insisted" if fixes else None,
         f"What is {name}'s {animal} called now?", f"What was {name}'s {animal} called before {pet2}?", "pet")
    inst = rng.choice(INSTRUMENTS)
    inst2 = _pick(rng, INSTRUMENTS, inst)
    fixes = rng.random() < 0.4
    fact(f"I've been learning the {inst} for a month now", f"Which instrument is {name} learning?",
         f"Gave up on the {inst}, switched to the {inst2}" if fixes else None,
         f"Which instrument does {name} play now?", f"Which instrument did {name} learn before the {inst2}?",
         "music")
    month = rng.choice(("May", "June", "July", "August", "September"))
    country = rng.choice(COUNTRIES)
    country2 = _pick(rng, COUNTRIES, country)
    fixes = rng.random() < 0.4
    fact(f"Booked flights to {country} for {month}!", f"Where is {name} travelling in {month}?",
         f"Had to change plans, going to {country2} in {month} instead" if fixes else None,
         f"Where is {name} going in {month} now?", f"Where did {name} plan to travel before {country2}?", "trip")
    # A fact spread over three turns: announcement, a friend's question, the answer.
    friend = other(name)
    wedding_city = rng.choice(CITIES)
    out.append(Event(rng.randrange(days), [
        (name, "Big news in my family: my sister is getting married!", "spread-1"),
        (friend, "Congrats! When and where?", "spread-2"),
        (name, f"On the {rng.randint(1, 28)}th of October, in {wedding_city}", "spread-3")],
        [(f"When and where is {name}'s sister getting married?", [0, 2], "spread")]))
    # Events told with a relative date, asked with the absolute one.
    for activity in rng.sample(ACTIVITIES, 2):
        day = rng.randrange(1, days)
        asked = (START + timedelta(days=day - 1)).strftime("%-d %B %Y")
        out.append(Event(day, [(name, f"{activity.capitalize()} yesterday, exhausted now", "date")],
                         [(f"What did {name} do on {asked}?", [0], "date")]))
    return out


def chitchat_conversations():
    """(number, messages) of chitchat-dataset's conversations (MIT; 7,168 two-person chats, inside the
    PyPI package), a message being one sender's consecutive lines; endless (it starts over)."""
    data = json.loads((Path(chitchat_dataset.__file__).parent / "dataset.json").read_text(encoding="utf-8"))
    convs = [[" ".join(u["text"].strip() for u in group if u["text"].strip()) for group in c["messages"]]
             for c in data.values()]
    for number, lines in enumerate(itertools.cycle(convs)):
        yield number, [line for line in lines if line]


def synthetic_chat(seed: int, speakers: int = 6, channels: int = 3, days: int = 30,
                   messages: int | None = None, name: str | None = None) -> tuple[Dialogue, dict[str, str]]:
    """One scope's chat; with ``messages``, days are added until it holds at least that many.
    Returns the dialogue and each turn's template (what the pooled vectors of the 100k mode use)."""
    rng = random.Random(seed)
    people = [f"{NAMES[i % len(NAMES)]}" + (f" {SURNAMES[i // len(NAMES) - 1]}" if i >= len(NAMES) else "")
              for i in range(speakers)]
    rooms = CHANNELS[:channels] if channels <= len(CHANNELS) else [f"room-{i}" for i in range(channels)]
    distractors = [line for conv in load_conversations(ALL) for line in conv.lines]
    if messages:
        days = max(days, messages // (speakers * 6) + 1)
        fillers = chitchat_conversations()

    def other(who):
        return _pick(rng, people, who)

    events: dict[int, list[Event]] = {}
    for person in people:
        for ev in person_events(rng, person, days, other):
            events.setdefault(ev.day, []).append(ev)
    turns: list[Turn] = []
    templates: dict[str, str] = {}
    questions: list[Question] = []
    counter = 0

    def post(day, clock, channel, speaker, text, template) -> str:
        nonlocal counter
        counter += 1
        tid = f"s{seed}-{counter}"
        turns.append(Turn(tid, channel, speaker, text, clock, str(day)))
        templates[tid] = template
        return tid

    def chatter(day, clock, channel) -> None:
        """Small talk, or a chatterbot-corpus line (on-topic talk that answers nothing asked)."""
        if rng.random() < 0.6:
            post(day, clock, channel, rng.choice(people), rng.choice(SMALL_TALK), "small")
        else:
            i = rng.randrange(len(distractors))
            post(day, clock, channel, rng.choice(people), distractors[i], f"corpus-{i % 97}")

    for day in range(days):
        clock = START + timedelta(days=day)
        todays = events.get(day, [])
        for _ in range(rng.randint(4, 12)):   # the day's talk that nobody asks about
            clock += timedelta(seconds=rng.randint(20, 900))
            chatter(day, clock, rng.choice(rooms))
        for ev in todays:
            channel = rng.choice(rooms)
            for _ in range(rng.randint(2, 6)):   # talk before it
                clock += timedelta(seconds=rng.randint(20, 600))
                chatter(day, clock, channel)
            ids = []
            for speaker, text, template in ev.lines:
                clock += timedelta(seconds=rng.randint(15, 120))
                ids.append(post(day, clock, channel, speaker, text, template))
            clock += timedelta(seconds=rng.randint(10, 90))
            speaker = ev.lines[0][0]
            post(day, clock, channel, other(speaker), rng.choice(ACKS).format(name=speaker.split()[0]), "ack")
            for text, which, category in ev.questions:
                questions.append(Question(f"s{seed}/q{len(questions)}", text, tuple(ids[i] for i in which), category))
        while messages and len(turns) < messages * (day + 1) / days:
            conv_no, lines = next(fillers)
            channel, pair = rng.choice(rooms), rng.sample(people, 2)
            for i, text in enumerate(lines):
                clock += timedelta(seconds=rng.randint(5, 120))
                post(day, clock, channel, pair[i % 2], text, f"chitchat-{conv_no}")
    return Dialogue(name or f"synthetic-{seed}", turns, questions), templates


def synthetic_dialogues(seed: int = 0, count: int = 3) -> list[Dialogue]:
    """``count`` chats of 6 speakers in 3 channels over 30 days, each its own scope."""
    return [synthetic_chat(seed + i)[0] for i in range(count)]


class PooledEmbedder(Embedder):
    """Real embeddings for a pool of sentences; every other known text takes a pool vector of its
    own template plus noise; unknown texts (queries, new messages) are embedded for real."""

    def __init__(self, base: Embedder, pool_texts: list[str], pool_vectors: np.ndarray,
                 assignment: dict[str, int], noise: float):
        super().__init__(base.model_name, base.batch_size, base.device, base.backend)
        self.pool_vectors, self.assignment, self.noise = pool_vectors, assignment, noise
        self.pool_index = {t: i for i, t in enumerate(pool_texts)}

    def vector(self, text: str) -> np.ndarray | None:
        i = self.pool_index.get(text)
        if i is not None:
            return self.pool_vectors[i]
        i = self.assignment.get(text)
        if i is None:
            return None
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        v = self.pool_vectors[i] + np.random.default_rng(seed).standard_normal(self.pool_vectors.shape[1]).astype(
            np.float32) * (self.noise / np.sqrt(self.pool_vectors.shape[1]))
        return v / np.linalg.norm(v)

    async def embed(self, texts: list[str], kind: str = "passage") -> np.ndarray:
        if kind != "passage":   # a question: embedded for real, as a query
            return await super().embed(texts, kind)
        known = [self.vector(t) for t in texts]
        missing = [t for t, v in zip(texts, known) if v is None]
        real = iter(await super().embed(missing)) if missing else iter(())
        return np.stack([v if v is not None else next(real) for v in known]).astype(np.float32)


async def pooled_embedder(base: Embedder, dialogue: Dialogue, templates: dict[str, str], pool: int,
                          noise: float, seed: int) -> PooledEmbedder:
    by_template: dict[str, list[str]] = {}
    for t in dialogue.turns:
        texts = by_template.setdefault(templates[t.id], [])
        texts.append(t.text)
    rng = random.Random(seed)
    distinct = {template: sorted(set(texts)) for template, texts in by_template.items()}
    ratio = sum(map(len, distinct.values())) / pool
    chosen = {template: rng.sample(texts, max(1, math.ceil(len(texts) / ratio)) if ratio > 1 else len(texts))
              for template, texts in distinct.items()}
    pool_texts = [t for texts in chosen.values() for t in texts]
    vectors = await base.embed(pool_texts)
    start, assignment = 0, {}
    for template, texts in by_template.items():
        n = len(chosen[template])
        for text in set(texts):
            h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            assignment[text] = start + h % n
        start += n
    return PooledEmbedder(base, pool_texts, vectors, assignment, noise)


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def scale_run(args) -> None:
    config = load_config(args.config)
    base = Embedder.from_config(config.embedder)
    dialogue, templates = synthetic_chat(args.seed, speakers=args.speakers, channels=len(CHANNELS),
                                         messages=args.messages, name="synthetic-100k")
    scope = "bench:synthetic-100k"
    print(f"{len(dialogue.turns)} messages, {len(set(t.text for t in dialogue.turns))} distinct texts, "
          f"{len(dialogue.questions)} questions", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "recall100k.sqlite3"
        db = await open_database(path)
        stored = await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=?", (scope,))
        embedder = base
        if stored < len(dialogue.turns):   # a database kept by --db already holds them: no pool needed
            t0 = time.perf_counter()
            embedder = await pooled_embedder(base, dialogue, templates, args.pool, args.noise, args.seed)
            print(f"pool of {len(embedder.pool_index)} sentences embedded in {time.perf_counter() - t0:.0f} s",
                  flush=True)
        engine = MemoryEngine(db, embedder, config.memory)
        try:
            await engine.start()
            t0 = time.perf_counter()
            msgs = [MemoryMessage(scope, t.channel, t.id, t.speaker, t.text, t.ts) for t in dialogue.turns]
            done = await engine.ingest_many(msgs, lambda d, n: print(f"  ingested {d}/{n}", file=sys.stderr)
                                            if d % 10240 < 256 else None)
            await engine.flush()
            stored = await db.fetchval("SELECT count(*) FROM memory_messages WHERE scope=?", (scope,))
            worlds = len(await engine.worlds(scope))
            print(f"ingest_many: {len(done)} new messages in {time.perf_counter() - t0:.0f} s; scope holds "
                  f"{stored} messages in {worlds} worlds", flush=True)
            questions = dialogue.questions[:args.queries]
            started = time.perf_counter()
            await engine.recall(scope, "warm up the scope's indexes", 5)
            print(f"first recall (loads the message vectors): {(time.perf_counter() - started) * 1000:.0f} ms",
                  flush=True)
            times = []
            for q in questions[:30]:
                started = time.perf_counter()
                await engine.recall(scope, q.text, 5)
                times.append((time.perf_counter() - started) * 1000)
            print(f"recall while the hnswlib graph is built (exact vectors), k=5: n={len(times)}, "
                  f"p50 {_p(times, 50):.1f} ms, p95 {_p(times, 95):.1f} ms", flush=True)
            started = time.perf_counter()
            await engine.messages.settle()
            print(f"graph built after another {time.perf_counter() - started:.0f} s", flush=True)
            embed_times = []
            for q in questions:
                started = time.perf_counter()
                await base.embed([q.text])
                embed_times.append((time.perf_counter() - started) * 1000)
            print(f"embedding one question alone (part of recall): p50 {_p(embed_times, 50):.1f} ms, "
                  f"p95 {_p(embed_times, 95):.1f} ms", flush=True)
            for k in (5, 10):
                times = []
                for q in questions:
                    started = time.perf_counter()
                    await engine.recall(scope, q.text, k)
                    times.append((time.perf_counter() - started) * 1000)
                print(f"recall at {stored} messages, k={k}: n={len(times)}, p50 {_p(times, 50):.1f} ms, "
                      f"p95 {_p(times, 95):.1f} ms", flush=True)
            ingest_times, embed_times = [], []
            last, run = dialogue.turns[-1].ts, time.time_ns()
            for i in range(args.single):
                text = f"{ACTIVITIES[i % len(ACTIVITIES)]} with {NAMES[i % len(NAMES)]} this morning, number {i}"
                message = MemoryMessage(scope, "general", f"single-{run}-{i}", "Anna", text,
                                        last + timedelta(seconds=30 * (i + 1)))
                started = time.perf_counter()
                await engine.ingest(message)
                ingest_times.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await base.embed([text + "!"])
                embed_times.append((time.perf_counter() - started) * 1000)
            print(f"single-message ingest into that scope (real embedding): n={len(ingest_times)}, "
                  f"p50 {_p(ingest_times, 50):.1f} ms, p95 {_p(ingest_times, 95):.1f} ms | embedding alone "
                  f"p50 {_p(embed_times, 50):.1f} ms", flush=True)
        finally:
            await engine.close()
            await db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="recall latency at scale: one scope of many synthetic messages")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--speakers", type=int, default=60)
    parser.add_argument("--pool", type=int, default=3000, help="sentences really embedded")
    parser.add_argument("--noise", type=float, default=0.3, help="Gaussian noise added to pool vectors (norm)")
    parser.add_argument("--queries", type=int, default=300, help="questions timed at each k")
    parser.add_argument("--single", type=int, default=100, help="single new messages whose ingest is timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", type=Path, help="keep the database here (a second run reuses what is stored)")
    parser.add_argument("--config", help="configuration file (default: ./config.toml)")
    asyncio.run(scale_run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
