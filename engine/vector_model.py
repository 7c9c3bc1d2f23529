"""Which embedding model the stored vectors come from, and refitting them to another one.

Every stored vector (a message's, a belief's, a world's centroid, a simulation graph's entity or
fact) is compared with others of the same table and with query vectors of the configured model.
Vectors of two models are not comparable (not even when their dimensions agree), so one
database holds one model's vectors: ``vector_model`` records which (the first process that
stores any records its model), and a process configured with another model refuses to start
(``check``: one line telling the operator to run `python -m bot memory reembed`).

``reembed`` refits every stored vector with the configured model, table by table, in batches
(one transaction each, the rows' new vectors with the batch's place in ``vector_refit``), so an
interrupted refit resumes where it stopped. Worlds' centroids are recomputed from their
messages' new vectors last; the in-memory indexes (hnswlib centroids, message graphs) are built
from the stored vectors when a process loads a scope, and every scope's stamp is moved so a
process running meanwhile reloads. The model is recorded as the database's once everything is
refitted. A message stored but not yet embedded (engine.memory.pending) has no vector to
refit: it is left as it is, and the next start embeds it with the configured model, like any
other. Stop the bot while it runs: a bot still configured with the old model would keep
storing the old model's vectors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.config import ConfigError
from engine.db import Database
from engine.memory import scope_cache, storage
from engine.memory.models import belief_text, to_blob
from engine.sim.graph.store import edge_text, entity_text

REFIT_BATCH = 256


class VectorModelMismatch(ConfigError):
    """The database's vectors come from another model than the configured one."""


@dataclass(frozen=True)
class Source:
    """A table of vectors and how each row's text is made (``text(row, embedder)``)."""
    table: str
    columns: str
    text: Callable[[Any, Any], str]


SOURCES = (
    Source("memory_messages", "author, text", lambda r, e: e.turn(r["author"], r["text"])),
    Source("beliefs", "subject, predicate, object",
           lambda r, e: belief_text(r["subject"], r["predicate"], r["object"])),
    Source("sim_entities", "name, type, summary", lambda r, e: entity_text(r["name"], r["type"], r["summary"])),
    Source("sim_edges", "fact", lambda r, e: edge_text(r["fact"])),
)


async def stored(db: Database) -> tuple[str, int] | None:
    """(model, dimensions) of the stored vectors, or None before any was stored."""
    row = await db.fetchone("SELECT model, dim FROM vector_model WHERE id=1")
    return (row["model"], row["dim"]) if row else None


async def record(db: Database, model: str, dim: int) -> None:
    async with db.transaction() as conn:
        await conn.execute("DELETE FROM vector_model WHERE id=1")
        await conn.execute("INSERT INTO vector_model(id, model, dim) VALUES (1, ?, ?)", (model, dim))


async def check(db: Database, model: str, dim: Callable[[], Any]) -> None:
    """Refuse (VectorModelMismatch, one line) when the stored vectors come from another model;
    record ``model`` when none is recorded yet. ``dim``: an awaitable factory of its dimensions
    (loading the model only when needed)."""
    found = await stored(db)
    if found is None:
        await record(db, model, await dim())
    elif found[0] != model:
        raise VectorModelMismatch(
            f"the stored memory vectors come from the embedding model {found[0]!r} and [embedder] model is "
            f"{model!r}: run `python -m bot memory reembed` to refit them with {model!r} (or set [embedder] "
            f"model = {found[0]!r})")


async def pending(db: Database, target: str) -> dict[str, int]:
    """table -> rows that do not yet carry ``target``'s vectors."""
    out = {}
    for source in SOURCES:
        last = await db.fetchval("SELECT last_id FROM vector_refit WHERE target=? AND tbl=?",
                                 (target, source.table), 0)
        out[source.table] = await db.fetchval(
            f"SELECT count(*) FROM {source.table} WHERE id > ? AND embedding IS NOT NULL", (last,), 0)
    return out


async def reembed(db: Database, embedder, progress: Callable[[str, int], Any] | None = None,
                  batch: int = REFIT_BATCH) -> dict[str, int]:
    """Refit every stored vector with ``embedder``'s model (resuming an interrupted refit);
    returns how many rows of each table got a new vector, plus the worlds recentred.
    ``progress(table, rows)`` after each batch."""
    target = embedder.model_name
    done: dict[str, int] = {}
    for source in SOURCES:
        done[source.table] = 0
        while True:
            last = await db.fetchval("SELECT last_id FROM vector_refit WHERE target=? AND tbl=?",
                                     (target, source.table), 0)
            rows = await db.fetchall(
                f"SELECT id, {source.columns} FROM {source.table} WHERE id > ? AND embedding IS NOT NULL "
                "ORDER BY id LIMIT ?", (last, batch))
            if not rows:
                break
            vectors = await embedder.embed([source.text(r, embedder) for r in rows])
            async with db.transaction() as conn:
                await conn.executemany(f"UPDATE {source.table} SET embedding=? WHERE id=?",
                                       [(to_blob(v), r["id"]) for r, v in zip(rows, vectors)])
                await conn.execute("DELETE FROM vector_refit WHERE target=? AND tbl=?", (target, source.table))
                await conn.execute("INSERT INTO vector_refit(target, tbl, last_id) VALUES (?,?,?)",
                                   (target, source.table, rows[-1]["id"]))
            done[source.table] += len(rows)
            if progress is not None:
                progress(source.table, len(rows))
    done["worlds"] = await storage.recentre_all(db, REFIT_BATCH)
    async with db.transaction() as conn:
        await scope_cache.move_every_stamp(conn)
        await conn.execute("DELETE FROM vector_refit WHERE target=?", (target,))
        await conn.execute("DELETE FROM vector_model WHERE id=1")
        await conn.execute("INSERT INTO vector_model(id, model, dim) VALUES (1, ?, ?)",
                           (target, int(embedder.dim)))
    return done
