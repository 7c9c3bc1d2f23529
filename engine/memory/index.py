"""Per-scope nearest-centroid index on hnswlib (cosine).

hnswlib updates a vector in place when an existing label is added again, but deletion only
marks an element: it still takes room and search has to step over it. So deleted labels are
counted and the index is rebuilt from the live vectors once they make up a quarter of it.

The module is Chroma's fork (package chroma-hnswlib, a wheel built for any x86-64 CPU), whose
``get_items`` returns lists of floats: ``vectors`` makes them a float32 matrix.
"""
from __future__ import annotations

import hnswlib
import numpy as np


class CentroidIndex:
    def __init__(self, dim: int, m: int = 16, ef_construction: int = 200, ef: int = 64,
                 capacity: int = 64):
        self.dim, self.m, self.ef_construction, self.ef = dim, m, ef_construction, ef
        self._ids: dict[int, str] = {}      # label -> world id
        self._labels: dict[str, int] = {}   # world id -> label
        self._next = 0
        self._deleted = 0
        self._new_index(capacity)

    def _new_index(self, capacity: int) -> None:
        self._index = hnswlib.Index(space="cosine", dim=self.dim)
        self._index.init_index(max_elements=max(capacity, 16), M=self.m,
                               ef_construction=self.ef_construction)
        self._index.set_ef(self.ef)

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, world_id: str) -> bool:
        return world_id in self._labels

    def ids(self) -> list[str]:
        return list(self._labels)

    def build(self, world_ids: list[str], vectors: np.ndarray) -> None:
        """Replace the whole content (start-up, compaction)."""
        self._ids.clear()
        self._labels.clear()
        self._deleted = 0
        self._next = len(world_ids)
        self._new_index(int(len(world_ids) * 1.5) + 16)
        if world_ids:
            labels = np.arange(len(world_ids))
            self._index.add_items(np.asarray(vectors, dtype=np.float32), labels)  # all cores
            for label, wid in zip(labels.tolist(), world_ids):
                self._ids[label] = wid
                self._labels[wid] = label

    def upsert(self, world_id: str, vector: np.ndarray) -> None:
        label = self._labels.get(world_id)
        if label is None:
            label = self._next
            self._next += 1
            if self._index.get_current_count() + 1 > self._index.get_max_elements():
                self._index.resize_index(self._index.get_max_elements() * 2)
            self._labels[world_id] = label
            self._ids[label] = world_id
        self._index.add_items(np.asarray(vector, dtype=np.float32).reshape(1, -1), [label], num_threads=1)

    def remove(self, world_id: str) -> None:
        label = self._labels.pop(world_id, None)
        if label is None:
            return
        del self._ids[label]
        self._index.mark_deleted(label)
        self._deleted += 1
        if self._deleted > 16 and self._deleted * 4 > self._index.get_current_count():
            self._compact()

    def _compact(self) -> None:
        ids = list(self._labels)
        vectors = self.vectors(ids)
        self.build(ids, vectors)

    def vector(self, world_id: str) -> np.ndarray:
        return self.vectors([world_id])[0]

    def vectors(self, world_ids: list[str]) -> np.ndarray:
        if not world_ids:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._index.get_items([self._labels[w] for w in world_ids]), dtype=np.float32)

    def search_many(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """``search`` for many vectors in one call."""
        k = min(k, len(self._labels))
        if k <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        query = np.asarray(vectors, dtype=np.float32)
        try:
            labels, dists = self._index.knn_query(query, k=k)
        except RuntimeError:
            self._compact()
            labels, dists = self._index.knn_query(query, k=k)
        return [[(self._ids[int(lab)], 1.0 - float(d)) for lab, d in zip(row_l, row_d)]
                for row_l, row_d in zip(labels, dists)]

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest worlds as (world id, cosine similarity), most similar first."""
        k = min(k, len(self._labels))
        if k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        try:
            labels, dists = self._index.knn_query(query, k=k, num_threads=1)
        except RuntimeError:  # too few reachable elements among deleted ones: compact and retry
            self._compact()
            labels, dists = self._index.knn_query(query, k=k, num_threads=1)
        return [(self._ids[int(lab)], 1.0 - float(d)) for lab, d in zip(labels[0], dists[0])]
