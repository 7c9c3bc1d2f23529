"""Import camel-oasis without the machine-learning libraries the run never uses.

camel-oasis 0.2.5 imports torch, transformers, sentence-transformers and scikit-learn at the top
of ``oasis.social_platform.recsys`` (and ``process_recsys_posts``), for its ``twitter`` and
``twhin-bert`` recommenders only. The run uses the offline ones, ``random`` and ``reddit``
(``oasis_setup.OFFLINE_RECSYS``), which are plain Python. Loading those libraries was most of a
child's start: measured about 12 of 16 CPU seconds of ``import oasis``, and a few hundred MiB.

``load_oasis`` imports oasis with placeholders standing in for those libraries while it is
imported, then takes the placeholders out of ``sys.modules``: anything imported later gets the
real library. The names oasis bound at import (``torch``, ``SentenceTransformer``, a
``TfidfVectorizer()`` ...) stay placeholders; using one after the import raises ``RuntimeError``
naming what it stood in for, so a hub-bound recommender fails with one clear line instead of
silently doing nothing.
"""
from __future__ import annotations

import sys
import types

from engine.sim.run.child.oasis_setup import OFFLINE_RECSYS

# The libraries, with the submodules oasis imports from (a parent must be present for
# `from a.b import c` to find a.b in sys.modules).
ML_MODULES = ("torch", "transformers", "sentence_transformers", "sklearn", "sklearn.feature_extraction",
              "sklearn.feature_extraction.text", "sklearn.metrics", "sklearn.metrics.pairwise")


class _Placeholder:
    """What a name from an absent library is bound to: usable during oasis's import (called,
    its attributes read, tested for truth: all false), an error once the import is over."""

    def __init__(self, name: str, importing: list[bool]):
        self._name, self._importing = name, importing

    def _check(self) -> None:
        if not self._importing[0]:
            raise RuntimeError(f"{self._name} is not loaded in the simulation run: only the offline "
                               f"recommenders ({', '.join(OFFLINE_RECSYS)}) are usable")

    def __getattr__(self, name: str) -> "_Placeholder":
        if name.startswith("__"):
            raise AttributeError(name)
        self._check()
        return _Placeholder(f"{self._name}.{name}", self._importing)

    def __call__(self, *args, **kwargs) -> "_Placeholder":
        self._check()
        return _Placeholder(f"{self._name}()", self._importing)

    def __bool__(self) -> bool:
        return False


def _placeholder_module(name: str, importing: list[bool]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a package: `from torch.x import y` finds no real submodule either
    setattr(module, "__getattr__", _Placeholder(name, importing).__getattr__)  # noqa: B010  # a module's own hook
    return module


def load_oasis() -> types.ModuleType:
    """``import oasis`` without loading ``ML_MODULES``; the real ones stay importable later.
    A library already imported in this process is left as it is."""
    if "oasis" in sys.modules:
        return sys.modules["oasis"]
    importing = [True]
    placed = [name for name in ML_MODULES if name.split(".")[0] not in sys.modules]
    sys.modules.update({name: _placeholder_module(name, importing) for name in placed})
    try:
        import oasis
    finally:
        importing[0] = False
        for name in placed:
            sys.modules.pop(name, None)
    return oasis
