"""The documentation holds together: README.md stays a front door (at most 200 lines, its Quick start
the two commands a newcomer types, the second the one .ci/run runs), every relative link of README.md
and docs/ leads to a file that exists and every #anchor to a heading of it, and every package
pyproject.toml names has a row in docs/dependencies.md saying what it is for."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
MAX_README_LINES = 200

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The page without code blocks and code spans, where a bracket is no link."""
    return _CODE.sub("", _FENCE.sub("", text))


def _anchors(page: Path) -> set[str]:
    """The #anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} +(.+?) *#*$", line):
            slug = re.sub(r"[^\w\- ]", "", _CODE.sub(lambda c: c.group(0)[1:-1], m.group(1)).lower())
            slug = slug.replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines: keep it a front door of at most {MAX_README_LINES}, "
        "and put the detail in a page of docs/")
    assert not [p for p in PAGES if p.stat().st_size == 0]


def quick_start_commands() -> list[str]:
    """The commands of the README's Quick start, as a newcomer copies them: the lines of the first
    code block under the heading."""
    text = README.read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    block = re.search(r"^```sh\n(.*?)^```", section.group(1), re.S | re.M)
    assert block, "the Quick start has no ```sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_the_two_commands_ci_runs():
    run, test = quick_start_commands()
    assert run.endswith(".venv/bin/python -m bot"), run
    assert test.endswith(".venv/bin/python -m pytest -q"), test
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test in ci, f".ci/run no longer runs the README's test command as written: {test}"


def test_every_relative_link_leads_somewhere():
    broken = []
    for page in PAGES:
        for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):        # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)} -> {target}"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where}: no heading with that anchor")
    assert broken == [], "\n".join(broken)


def test_every_page_of_docs_is_reachable_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve()
              for t in _LINK.findall(_prose(README.read_text(encoding="utf-8")))}
    assert sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in linked) == []


def _name(requirement: str) -> str:
    """A requirement's or a table cell's package name, normalised as pip does."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert name, f"no package name in {requirement!r}"
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def test_every_dependency_says_what_it_is_for():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra}
    table = (DOCS / "dependencies.md").read_text(encoding="utf-8")
    described = set()
    for row in re.findall(r"^\| *([^|]+?) *\|", table, re.M):
        for item in re.sub(r"\([^)]*\)", "", row).split(","):
            if item.strip() and item.strip() not in ("package", "---"):
                described.add(_name(item))
    assert sorted(wanted - described) == [], "packages of pyproject.toml missing from docs/dependencies.md"
