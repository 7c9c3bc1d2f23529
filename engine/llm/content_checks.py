"""Checks of an LLM answer's meaning, declared per schema: an answer can have the right shape and
still be junk (a persona bio "Organizatio ...oops", a placeholder "N/A", a name the source
never mentions). Repaired JSON in particular validates easily, so shape alone proves little.

A step declares, with paths into its pydantic model, what its answer must hold:

    ContentChecks(texts=("personas[].bio", "personas[].persona"),
                  names=("personas[].entity_name",), source=the_prompt_text, items=("personas",))

- ``texts``: free text that must be complete and real: not empty (unless the path ends in
  ``?``), not a placeholder ("N/A", "string", "TODO", "..."), no truncation marker ("..." or
  "…" at the end or glued to a word, "oops"-style junk), no cut-off last word.
- ``names``: names that must occur in ``source`` (whole, or every word of them).
- ``items``: the top-level lists whose elements pass or fail one by one: when the answer still
  fails after the retries, the bad elements are dropped and the good ones kept (one persona
  fails, not the batch; one entity or relation, not the chunk). A problem outside them, or
  nothing good left, fails the whole answer.

``[]`` in a path walks every element of a list. ``LLMClient.structured(..., checks=...)`` runs
the checks after validation and asks again with the problems; see ``engine.llm.client``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterator

from pydantic import BaseModel, ValidationError

PLACEHOLDERS = {"n/a", "na", "none", "null", "nil", "string", "str", "todo", "tbd", "tba", "placeholder",
                "...", "…", "xxx", "xxxx", "lorem ipsum", "example", "text", "your text here", "undefined",
                "-", "--", "?"}
_JUNK = re.compile(r"\boops\b|(?:\.\.\.|…)(?=\w)|lorem ipsum|\basdf", re.I)
_CUT_END = re.compile(r"(?:\.\.\.|…|\[…\]|\[\.\.\.\])\s*$")
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Problem:
    path: str        # "personas[2].bio"
    message: str     # "is cut off ('Organizat')"
    item: tuple[str, int] | None = None   # (items list, index) when the problem is inside one

    def __str__(self) -> str:
        return f"{self.path} {self.message}"


def text_problem(text: str, optional: bool = False) -> str | None:
    """What is wrong with one free-text value, or None."""
    stripped = (text or "").strip()
    if not stripped:
        return None if optional else "is empty"
    if stripped.lower().strip(" .:;!") in PLACEHOLDERS or stripped.lower() in PLACEHOLDERS:
        return f"is a placeholder ({stripped[:20]!r}), not content"
    junk = _JUNK.search(stripped)
    if junk:
        return f"holds junk or a truncation marker ({stripped[max(0, junk.start() - 12):junk.end() + 8]!r})"
    if _CUT_END.search(stripped):
        return f"is cut off (ends in {stripped[-20:]!r})"
    words = _WORD.findall(stripped)
    last = words[-1] if words and stripped[-1].isalpha() else ""
    if len(last) >= 3 and any(len(w) > len(last) and w.lower().startswith(last.lower()) for w in words[:-1]):
        return f"ends in a cut-off word ({last!r})"
    return None


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", (text or "").lower()))


def name_in(name: str, source: str) -> bool:
    """Whether ``name`` occurs in ``source``: as a whole, or every word of three letters or more."""
    norm, text = _norm(name), _norm(source)
    if not norm:
        return False
    if f" {norm} " in f" {text} ":
        return True
    words = set(text.split())
    significant = [w for w in norm.split() if len(w) >= 3]
    return bool(significant) and all(w in words for w in significant)


def walk(data: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(concrete path, value) for every value ``path`` reaches in plain data (``model_dump``)."""
    parts = [p for p in re.split(r"\.", path) if p]

    def go(node: Any, i: int, where: str) -> Iterator[tuple[str, Any]]:
        if i == len(parts):
            yield where, node
            return
        part = parts[i]
        many = part.endswith("[]")
        key = part[:-2] if many else part
        if not isinstance(node, dict) or key not in node:
            return
        child, here = node[key], f"{where}.{key}" if where else key
        if many:
            for n, element in enumerate(child if isinstance(child, list) else []):
                yield from go(element, i + 1, f"{here}[{n}]")
        else:
            yield from go(child, i + 1, here)

    yield from go(data, 0, "")


@dataclass(frozen=True)
class ContentChecks:
    texts: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    source: str = ""
    items: tuple[str, ...] = ()

    def for_source(self, source: str) -> "ContentChecks":
        """These checks with the text that names must occur in."""
        return replace(self, source=source)

    def item_of(self, path: str) -> tuple[str, int] | None:
        for items in self.items:
            found = re.match(rf"{re.escape(items)}\[(\d+)\]", path)
            if found:
                return items, int(found.group(1))
        return None

    def problem(self, path: str, message: str) -> Problem:
        return Problem(path, message, self.item_of(path))

    def problems(self, value: BaseModel | dict) -> list[Problem]:
        data = value.model_dump() if isinstance(value, BaseModel) else value
        found: list[Problem] = []
        for spec in self.texts:
            optional = spec.endswith("?")
            for where, text in walk(data, spec.rstrip("?")):
                if isinstance(text, str) and (why := text_problem(text, optional)):
                    found.append(self.problem(where, why))
        for spec in self.names:
            for where, name in walk(data, spec):
                if isinstance(name, str) and not name_in(name, self.source):
                    found.append(self.problem(where, f"names {name[:60]!r}, which the source does not mention"))
        return found

    def cut_values(self, value: BaseModel | dict, fragment: str) -> list[Problem]:
        """Problems for the string values that are ``fragment``: the text a cut-off answer ended in."""
        data = value.model_dump() if isinstance(value, BaseModel) else value
        frag = fragment.strip()
        found = []

        def visit(node: Any, where: str) -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    visit(v, f"{where}.{k}" if where else k)
            elif isinstance(node, list):
                for n, v in enumerate(node):
                    visit(v, f"{where}[{n}]")
            elif isinstance(node, str) and frag and node.strip() == frag:
                found.append(self.problem(where, f"is cut off where the answer ended ({frag[-30:]!r})"))

        visit(data, "")
        return found

    def without_broken_items(self, model_cls: type[BaseModel], data: Any, err: ValidationError) -> BaseModel | None:
        """``data`` validated without the item-list elements the validation errors lie in (the
        last element of a cut-off answer, typically); None when an error lies elsewhere."""
        broken: dict[str, set[int]] = {}
        for e in err.errors():
            loc = e["loc"]
            if not (len(loc) >= 2 and loc[0] in self.items and isinstance(loc[1], int) and isinstance(data, dict)):
                return None
            broken.setdefault(str(loc[0]), set()).add(loc[1])
        trimmed = {**data, **{key: [x for n, x in enumerate(data[key]) if n not in bad] for key, bad in broken.items()}}
        try:
            return model_cls.model_validate(trimmed)
        except ValidationError:
            return None

    def keep_good(self, value: BaseModel, problems: list[Problem]) -> tuple[BaseModel, int] | None:
        """``value`` without the items that have problems, and how many were dropped; None when a
        problem lies outside the items (the whole answer fails) or nothing good is left."""
        if not self.items or any(p.item is None for p in problems):
            return None
        bad = {p.item for p in problems}
        update = {items: [e for n, e in enumerate(getattr(value, items)) if (items, n) not in bad]
                  for items in self.items}
        if not any(update.values()):
            return None
        return value.model_copy(update=update), len(bad)
