"""The tests' layout rule (tests/README.md) holds: every test file sits in the folder that mirrors
the package it tests, in tests/processes/, or at the top for the whole tree; shared code lives in
tests/helpers/ and tests/fakes/ and holds no tests; every folder is a package, so that pytest
never puts tests/ itself on sys.path (where tests/engine would hide the real engine)."""
from __future__ import annotations

from tests.conftest import REPO

TESTS = REPO / "tests"


def test_every_test_file_mirrors_a_package_or_says_what_it_is():
    misplaced = []
    for path in TESTS.rglob("test_*.py"):
        folder = path.parent.relative_to(TESTS)
        top = folder.parts[0] if folder.parts else ""
        if top in ("helpers", "fakes", "data") or (top != "processes" and folder.parts
                                                    and not (REPO / folder).is_dir()):
            misplaced.append(str(path.relative_to(REPO)))
    assert misplaced == [], f"test files outside the layout of tests/README.md: {misplaced}"


def test_every_folder_of_tests_is_a_package():
    folders = {p.parent for p in TESTS.rglob("*.py")}
    assert sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists()) == []
