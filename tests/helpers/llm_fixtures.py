"""Fixtures for the LLM and simulation tests: a fake OpenAI endpoint and a migrated database.

Imported by the test modules that use them (kept out of conftest.py on purpose: other test
areas define their own)."""
from __future__ import annotations

import pytest
import pytest_asyncio

from engine.db import open_database
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture(scope="session")
def fake_openai():
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def openai_server(fake_openai):
    """The session's fake endpoint, with a fresh responder and request log for this test."""
    fake_openai.requests.clear()
    fake_openai.responder = lambda body: "ok"
    yield fake_openai


# For tests that take conftest's ``db``/``db_url`` but whose point is not storage (real OASIS runs,
# LLM fallbacks, the agent loop, refusals): SQLite only, to keep the suite's time; a neighbour in
# the same module covers their storage on both backends.
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@pytest_asyncio.fixture
async def db(tmp_path):
    database = await open_database(tmp_path / "test.sqlite3")
    yield database
    await database.close()


@pytest.fixture(scope="session")
def embedder():
    """The default embedding model (loaded once per process, on first use)."""
    from engine.embedder import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def minilm():
    """The English MiniLM, for tests whose thresholds or expected figures are its own."""
    from engine.config import MINILM_MODEL
    from engine.embedder import Embedder

    return Embedder(MINILM_MODEL)
