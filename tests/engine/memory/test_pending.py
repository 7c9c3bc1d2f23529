"""Store first, embed later (engine.memory.pending): a message is stored, keyword-searchable and
within its audience before its vector exists; the worker routes it afterwards, once, whichever
process does it, also after the process that stored it was killed.

The embedder here is the real one, held at a gate this test opens (``GatedEmbedder``): the slow
path of a busy machine, made as slow as the test needs."""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest

from engine.config import MINILM_MODEL, MemorySection, calibrated
from engine.db import open_database
from engine.embedder import Embedder
from engine.memory import MemoryEngine
from engine.memory.audience import Viewer
from engine.memory.ingest_queue import IngestQueue
from engine.owners import ProcessOwner
from tests.conftest import REPO
from tests.helpers.memory import Chat, said
from tests.helpers.wait import until

pytestmark = pytest.mark.timeout(300)


class GatedEmbedder(Embedder):
    """The real embedder; stored messages (passages) wait for ``gate`` and are counted."""

    def __init__(self, model: str = MINILM_MODEL):
        super().__init__(model)
        self.gate = threading.Event()
        self.embedded: Counter[str] = Counter()
        self._count = threading.Lock()

    def encode(self, texts, kind="passage"):
        if kind == "passage":
            self.gate.wait()
            with self._count:
                self.embedded.update(texts)
        return super().encode(texts, kind)


async def started(db, embedder: Embedder, owner: ProcessOwner | None = None) -> MemoryEngine:
    section = MemorySection(**calibrated(MINILM_MODEL)["memory"])
    engine = MemoryEngine(db, embedder, section, owner=owner)
    await engine.start()
    return engine


@contextlib.asynccontextmanager
async def gated_engine(db):
    """A started engine whose embedder waits at a gate the test opens (``embedder.gate.set()``):
    the priors routing starts from are embedded with it open, then it is shut. Open again at the
    end, so the engine can close."""
    embedder = GatedEmbedder()
    embedder.gate.set()
    engine = await started(db, embedder)
    embedder.gate.clear()
    try:
        yield engine, embedder
    finally:
        embedder.gate.set()
        await engine.close()


async def routed(db) -> int:
    return await db.fetchval("SELECT count(*) FROM memory_messages WHERE world_id IS NOT NULL", default=0)


async def test_a_message_is_found_by_its_words_before_its_vector_exists(db):
    async with gated_engine(db) as (engine, embedder):
        queue = IngestQueue(engine, batch_wait_ms=0)
        queue.start()
        chat = Chat()
        try:
            await queue.put(chat.msg("the ferry to Skopelos leaves at seven from pier four"))
            await asyncio.wait_for(queue.settled(chat.scope, chat.channel), 10)   # stored: the gate is still shut
            assert await routed(db) == 0
            found = await engine.recall(Viewer(chat.scope), "when does the ferry to Skopelos leave?")
            assert [e.text for e in found.evidence] == ["the ferry to Skopelos leaves at seven from pier four"]
            assert found.evidence[0].world_id == ""
            assert await engine.worlds(Viewer(chat.scope)) == []   # worlds hold routed messages only
            embedder.gate.set()
            await until(lambda: routed(db), 60, "the message routed")
            worlds = await engine.worlds(Viewer(chat.scope))
            assert [w.evidence for w in worlds] == [1]
            again = await engine.recall(Viewer(chat.scope), "when does the ferry to Skopelos leave?")
            assert [e.world_id for e in again.evidence] == [worlds[0].id]
        finally:
            embedder.gate.set()
            await queue.close()


async def test_a_pending_message_of_a_private_channel_stays_in_its_audience(db):
    async with gated_engine(db) as (engine, embedder):
        chat = Chat()
        secret = chat.msg("the staff bonus pool is forty thousand this year", channel="staff")
        secret.audience = "staff"
        public = chat.msg("the bonus for the raffle is a bicycle", channel="general")
        public.audience = ""
        assert await engine.store([secret, public]) == 2
        # waiting for a world, counted for /worlds within what each may read
        assert await engine.unsorted(Viewer(chat.scope, "")) == 1
        assert await engine.unsorted(Viewer(chat.scope, "staff")) == 2
        outsider = await engine.recall(Viewer(chat.scope, ""), "bonus pool")
        assert [e.text for e in outsider.evidence] == ["the bonus for the raffle is a bicycle"]
        insider = await engine.recall(Viewer(chat.scope, "staff"), "bonus pool")
        assert "the staff bonus pool is forty thousand this year" in [e.text for e in insider.evidence]
        # the channel opens up to everyone before it is embedded: its pending message follows
        await engine.set_audiences(chat.scope, {"staff": ""})
        opened = await engine.recall(Viewer(chat.scope, ""), "bonus pool")
        assert "the staff bonus pool is forty thousand this year" in [e.text for e in opened.evidence]
        # and a channel made private hides its pending message from everyone outside
        await engine.set_audiences(chat.scope, {"general": "general"})
        hidden = await engine.recall(Viewer(chat.scope, ""), "raffle bicycle")
        assert hidden.evidence == []
        embedder.gate.set()
        await until(lambda: routed(db), 60, "both routed")
        await engine.embedded()
        assert await engine.unsorted(Viewer.operator(chat.scope)) == 0
        worlds = {w.audience for w in await engine.worlds(Viewer.operator(chat.scope))}
        assert worlds == {"", "general"}
        assert (await engine.recall(Viewer(chat.scope, ""), "raffle bicycle")).evidence == []


async def test_forgetting_a_pending_message_leaves_nothing_for_the_worker(db):
    async with gated_engine(db) as (engine, embedder):
        chat = Chat()
        await engine.store([said(chat, "my door code is 4417", "bob", "u-bob"),
                            said(chat, "lunch at noon in the park", "carol", "u-carol")])
        await until(lambda: db.fetchval("SELECT count(*) FROM memory_messages WHERE claimed_by IS NOT NULL"), 10,
                    "the worker claims them (and waits at the gate)")
        counts = await engine.forget_author(chat.scope, "u-bob")
        assert counts["messages"] == 1
        assert (await engine.recall(Viewer(chat.scope), "door code 4417")).evidence == []
        exported = await engine.export_member(chat.scope, "u-carol")
        assert [m["text"] for m in exported["messages"]] == ["lunch at noon in the park"]
        embedder.gate.set()
        await until(lambda: routed(db), 60, "the rest routed")
        assert await db.fetchval("SELECT count(*) FROM memory_messages") == 1
        assert [w.evidence for w in await engine.worlds(Viewer(chat.scope))] == [1]


async def test_a_message_stored_twice_is_kept_once_pending_or_routed(db):
    async with gated_engine(db) as (engine, embedder):
        chat = Chat()
        message = chat.msg("the quiz night moved to Thursday")
        assert await engine.store([message]) == 1
        assert await engine.store([message]) == 0          # seen again while pending (a backfill, a restart)
        embedder.gate.set()
        await engine.embedded()
        assert await engine.store([message]) == 0          # and once routed
        assert await engine.ingest_many([message]) == []   # an import of the same history
        assert await db.fetchval("SELECT count(*) FROM memory_messages") == 1



class RefusingEmbedder(GatedEmbedder):
    """Fails every batch that holds a text with ``refused`` in it, as a model would on one bad input."""

    refused = "UNEMBEDDABLE-7f3a"

    def encode(self, texts, kind="passage"):
        if kind == "passage" and any(self.refused in t for t in texts):
            raise ValueError("this text cannot be embedded")
        return super().encode(texts, kind)


async def test_a_message_that_cannot_be_embedded_is_removed_and_the_others_are_routed(db):
    embedder = RefusingEmbedder()
    embedder.gate.set()
    engine = await started(db, embedder)
    chat = Chat()
    try:
        texts = ["the bakery opens at six", f"broken {RefusingEmbedder.refused} line", "bread is sold out by nine"]
        assert await engine.store([chat.msg(t) for t in texts]) == 3
        await engine.embedded()
        kept = await db.fetchall("SELECT text, world_id FROM memory_messages ORDER BY id")
        assert [r["text"] for r in kept] == [texts[0], texts[2]] and all(r["world_id"] for r in kept)
    finally:
        await engine.close()

STORER = textwrap.dedent("""
    import asyncio, sys, threading
    from engine.config import MINILM_MODEL, MemorySection, calibrated
    from engine.db import open_database
    from engine.embedder import Embedder
    from engine.memory import MemoryEngine
    from engine.owners import ProcessOwner
    from tests.helpers.memory import Chat

    class Stuck(Embedder):
        def encode(self, texts, kind="passage"):
            if kind == "passage":
                threading.Event().wait()   # never: this process is killed while embedding
            return super().encode(texts, kind)

    async def main():
        db = await open_database(sys.argv[1])
        owner = ProcessOwner(db, 30.0)
        await owner.start()
        engine = MemoryEngine(db, Stuck(MINILM_MODEL), MemorySection(**calibrated(MINILM_MODEL)["memory"]),
                              owner=owner)
        await engine.start()
        chat = Chat()
        await engine.store([chat.msg(f"note {i} about the harbour festival") for i in range(20)])
        while not await db.fetchval("SELECT count(*) FROM memory_messages WHERE claimed_by IS NOT NULL"):
            await asyncio.sleep(0.05)
        print("stored", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def test_messages_a_killed_process_left_pending_are_embedded_by_the_next(db_url):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", STORER, db_url], stdout=subprocess.PIPE, env=env, cwd=REPO)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 120)
        assert line.strip() == b"stored"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    db = await open_database(db_url)
    owner = ProcessOwner(db, 30.0)
    await owner.start()
    engine = await started(db, Embedder(MINILM_MODEL), owner)
    try:
        assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE world_id IS NULL") == 20
        await until(lambda: routed(db), 60, "the dead process's messages routed")
        await until(lambda: db.fetchval("SELECT count(*) = 0 FROM memory_messages WHERE world_id IS NULL"), 60,
                    "every one of them routed")
        assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE claimed_by IS NOT NULL") == 0
    finally:
        await engine.close()
        await owner.release()
        await db.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_two_processes_on_one_postgresql_database_never_embed_a_message_twice(db_url):
    dbs, owners, engines, embedders = [], [], [], []
    for _ in range(2):
        db = await open_database(db_url)
        owner = ProcessOwner(db, 30.0)
        await owner.start()
        embedder = GatedEmbedder()
        embedder.gate.set()
        dbs.append(db)
        owners.append(owner)
        embedders.append(embedder)
        engines.append(await started(db, embedder, owner))
    try:
        texts = []
        for n in range(120):
            chat = Chat(scope=f"test:{n % 6}", channel=f"c{n % 3}")
            chat.n = n
            texts.append(f"message {n} about topic {n % 7}")
            await engines[n % 2].store([chat.msg(texts[-1])])
        await until(lambda: dbs[0].fetchval("SELECT count(*) = 0 FROM memory_messages WHERE world_id IS NULL"), 120,
                    "every message routed")
        turns = {embedders[0].turn("alice", t) for t in texts}
        mine = [Counter({t: c for t, c in e.embedded.items() if t in turns}) for e in embedders]
        both = mine[0] + mine[1]
        assert set(both) == turns
        assert max(both.values()) == 1, "a message was embedded twice"
        assert await routed(dbs[0]) == 120
    finally:
        for engine, owner, db in zip(engines, owners, dbs):
            await engine.close()
            await owner.release()
            await db.close()


class PermitEmbedder(Embedder):
    """The real embedder; once ``held``, each batch of stored messages waits for a permit."""

    def __init__(self):
        super().__init__(MINILM_MODEL)
        self.held = False
        self.permits = threading.Semaphore(0)

    def encode(self, texts, kind="passage"):
        if kind == "passage" and self.held:
            self.permits.acquire()
        return super().encode(texts, kind)


async def test_waiting_for_routing_waits_for_what_was_stored_before_not_for_what_keeps_coming(db):
    """A busy chat always has messages waiting for their world: /worlds waits for those stored
    before it asked (up to ``routed_wait_s``), not until none waits (it waited the whole 2 s at
    every /worlds in the soak)."""
    embedder = PermitEmbedder()
    engine = await started(db, embedder)
    embedder.held = True
    chat = Chat()
    try:
        await engine.store([chat.msg("the ferry to Skopelos leaves at seven from pier four")])
        await until(lambda: db.fetchval("SELECT count(*) FROM memory_messages WHERE claimed_by IS NOT NULL"), 10,
                    "the worker claims it (and waits for a permit)")
        waiting = asyncio.create_task(engine.pending.routed(chat.scope, 60))   # reads its mark first
        await engine.store([chat.msg("the ferry back leaves Skopelos at six")])   # stored after the call
        embedder.permits.release()   # the first batch alone
        await asyncio.wait_for(waiting, 20)
        assert await routed(db) == 1
        assert await db.fetchval("SELECT count(*) FROM memory_messages WHERE world_id IS NULL") == 1
    finally:
        embedder.permits.release(100)
        await engine.close()
