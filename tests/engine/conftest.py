"""Fixtures of the engine's tests."""
from __future__ import annotations

import pytest

from engine.jobs import JobRunner


@pytest.fixture
async def runners(db):
    """Job runners on the test's database, shut down (their owner's heartbeat stopped) after it."""
    made: list[JobRunner] = []

    def make(**options) -> JobRunner:
        made.append(JobRunner(db, **options))
        return made[-1]

    yield make
    for runner in made:
        await runner.shutdown()
