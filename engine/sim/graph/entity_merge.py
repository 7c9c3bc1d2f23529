"""Which extracted names are one actor: the merge rule of entity resolution, vectorised.

Two rules join names of one type (``types[i]``), transitively:
- a lone word ("okafor") joins the single multi-word name of its type that ends with it
  ("teresa okafor"); with two candidates ("teresa okafor", "james okafor") it stays alone;
- names whose embeddings have a cosine similarity of at least ``threshold`` join.

The surname rule is one dictionary lookup per name; the similarities of each type's names
come from one matrix product per block of rows (memory stays at ``block`` x names), and the
groups are the connected components of the resulting sparse graph. Names are the normalised
keys of ``step.resolve``; vectors are L2-normalised rows, so a dot product is the cosine.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

BLOCK_ROWS = 256  # short numpy calls: the event loop's thread gets the GIL between them


def surname_pairs(keys: list[str], types: list[str]) -> list[tuple[int, int]]:
    """(lone word, its one multi-word owner of the same type) index pairs."""
    owners: dict[tuple[str, str], list[int]] = defaultdict(list)
    for j, key in enumerate(keys):
        if " " in key:
            owners[(key.rsplit(" ", 1)[1], types[j])].append(j)
    pairs = []
    for i, key in enumerate(keys):
        if " " not in key:
            found = owners.get((key, types[i]), [])
            if len(found) == 1:
                pairs.append((i, found[0]))
    return pairs


def similar_pairs(vecs: np.ndarray, types: list[str], threshold: float,
                  block: int = BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) of one type whose vectors' dot product reaches ``threshold``."""
    rows, cols = [], []
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(types):
        by_type[t].append(i)
    for members in by_type.values():
        if len(members) < 2:
            continue
        idx = np.asarray(members)
        sub = np.ascontiguousarray(vecs[idx], dtype=np.float32)
        for start in range(0, len(idx), block):
            sims = sub[start:start + block] @ sub.T
            r, c = np.nonzero(sims >= threshold)
            upper = c > r + start  # each pair once, never a name with itself
            rows.append(idx[r[upper] + start])
            cols.append(idx[c[upper]])
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(rows), np.concatenate(cols)


def _components(n: int, rows: np.ndarray, cols: np.ndarray) -> tuple[int, np.ndarray]:
    graph = coo_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n, n))
    return connected_components(graph, directed=False)


def merge_groups(keys: list[str], types: list[str], vecs: np.ndarray | None,
                 threshold: float) -> tuple[list[list[int]], int]:
    """The groups of indices that are one actor, in order of their first member (members in
    index order), and how many of the joins only the embeddings made."""
    n = len(keys)
    if n == 0:
        return [], 0
    surname = surname_pairs(keys, types)
    s_rows = np.asarray([i for i, _ in surname], dtype=np.int64)
    s_cols = np.asarray([j for _, j in surname], dtype=np.int64)
    by_names, labels = _components(n, s_rows, s_cols)
    merged_by_embedding = 0
    if vecs is not None and n > 1:
        e_rows, e_cols = similar_pairs(np.asarray(vecs), types, threshold)
        if len(e_rows):
            count, labels = _components(n, np.concatenate([s_rows, e_rows]), np.concatenate([s_cols, e_cols]))
            merged_by_embedding = by_names - count
    groups: dict[int, list[int]] = {}
    for i, label in enumerate(labels.tolist()):
        groups.setdefault(label, []).append(i)
    return list(groups.values()), merged_by_embedding
