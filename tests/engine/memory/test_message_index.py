"""A scope's message vectors catch up on the rows stored since they last looked without reading
the rows other scopes stored meanwhile (a (scope, id) index, not a range of ids)."""
from __future__ import annotations

import numpy as np

from engine.db import open_database
from engine.memory.audience import Viewer
from engine.memory.message_index import MessageIndex
from tests.helpers.search import seed_scope, vm_steps


async def test_the_vector_index_catches_up_without_reading_other_scopes(tmp_path):
    db = await open_database(tmp_path / "bot.sqlite3")
    try:
        index = MessageIndex(1000)
        await seed_scope(db, "small:1", "ws", 3, 1)
        await index.catch_up(db, "small:1")
        alone = await vm_steps(db, index.catch_up(db, "small:1"))
        await seed_scope(db, "big:1", "wb", 3000, 100)    # stored after: every id above the small scope's
        beside = await vm_steps(db, index.catch_up(db, "small:1"))
        assert beside < 2 * alone                    # a range of ids read all 3,000 (~100x)
        assert len(await index.search(db, Viewer.operator("small:1"), np.ones(2, dtype=np.float32), 10)) == 3
    finally:
        await db.close()
