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
- Every answer, whatever it declares: no string anywhere in it may be a piece of the JSON schema
  it was asked with (a JSON pointer such as ``#/$defs/SectionPlan``, ``$ref``, a schema object),
  and no declared text may be a model's name or its own field's name echoed back as content (a
  section titled "SectionPlan", a title that reads "title"; a name field may hold "name"). Small
  models copy the schema they are shown.
- ``items``: the top-level lists whose elements pass or fail one by one: when the answer still
  fails after the retries, the bad elements are dropped and the good ones kept (one persona
  fails, not the batch; one entity or relation, not the chunk). A problem outside them, or
  nothing good left, fails the whole answer.

- ``language``: the language the declared ``texts`` were asked in (engine.language): an answer
  whose texts, read together, are surely in another is asked again; the problem is soft: when
  the retries do not fix it, the answer is kept rather than refused (a useful answer in the
  wrong language beats none). Read by ``language_problems``, apart, because the detector is CPU
  work the client runs off the event loop.

``[]`` in a path walks every element of a list. ``LLMClient.structured(..., checks=...)`` runs
the checks after validation and asks again with the problems; see ``engine.llm.client``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterator

from pydantic import BaseModel, ValidationError

from engine import language as languages

PLACEHOLDERS = {"n/a", "na", "none", "null", "nil", "string", "str", "todo", "tbd", "tba", "placeholder",
                "...", "…", "xxx", "xxxx", "lorem ipsum", "example", "text", "your text here", "undefined",
                "-", "--", "?"}
_JUNK = re.compile(r"\boops\b|(?:\.\.\.|…)(?=\w)|lorem ipsum|\basdf", re.I)
_CUT_END = re.compile(r"(?:\.\.\.|…|\[…\]|\[\.\.\.\])\s*$")
_WORD = re.compile(r"[^\W\d_]+")
# Pieces of a JSON schema: a JSON pointer into it, its keywords, one of its objects.
_SCHEMA_PIECE = re.compile(r"#/|\$defs\b|\$ref\b|\$schema\b|[{,]\s*\"(?:type|properties|required|items|title)\"\s*:")


@dataclass(frozen=True)
class Problem:
    path: str        # "personas[2].bio"
    message: str     # "is cut off ('Organizat')"
    item: tuple[str, int] | None = None   # (items list, index) when the problem is inside one
    soft: bool = False   # the answer is kept with it when the retries do not fix it

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


def schema_problem(text: str) -> str | None:
    """What is wrong with a value that is a piece of a JSON schema rather than content, or None."""
    piece = _SCHEMA_PIECE.search(text or "")
    if piece:
        return f"is a piece of the JSON schema ({text.strip()[:40]!r}), not content"
    return None


def _ident(text: str) -> str:
    """A name folded for comparison: 'SectionPlan', 'section_plan' and 'Section plan' are one."""
    return re.sub(r"[\W_]+", "", (text or "").lower())


def model_names(model_cls: type[BaseModel]) -> set[str]:
    """The names of the models in ``model_cls``'s JSON schema (its own and its parts'), folded by
    ``_ident``: 'SectionPlan' for a report outline's sections."""
    schema = model_cls.model_json_schema()
    names = {_ident(name) for name in schema.get("$defs", {})} | {_ident(schema.get("title", ""))}
    names.discard("")
    return names


def _echoes_own_field(path: str, text: str) -> bool:
    """Whether ``text`` is the name of the field it fills ("title" as a title). A field that holds
    a name is exempt: an entity type may well have an attribute called "name"."""
    field = _ident(path.rsplit(".", 1)[-1].split("[")[0])
    return field != "name" and _ident(text) == field


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


def strings(data: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(path, value) for every string in plain data, keys excluded."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from strings(value, f"{where}.{key}" if where else str(key))
    elif isinstance(data, list):
        for n, value in enumerate(data):
            yield from strings(value, f"{where}[{n}]")
    elif isinstance(data, str):
        yield where, data


@dataclass(frozen=True)
class ContentChecks:
    texts: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    source: str = ""
    items: tuple[str, ...] = ()
    language: str | None = None

    def in_language(self, lang: str) -> "ContentChecks":
        """These checks with the language the texts were asked in."""
        return replace(self, language=lang)

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
        found: list[Problem] = [self.problem(where, why) for where, text in strings(data)
                                if (why := schema_problem(text))]
        models = model_names(type(value)) if isinstance(value, BaseModel) else set()
        for spec in self.texts:
            optional = spec.endswith("?")
            for where, text in walk(data, spec.rstrip("?")):
                if not isinstance(text, str) or schema_problem(text):
                    continue
                if why := text_problem(text, optional):
                    found.append(self.problem(where, why))
                elif _ident(text) in models or _echoes_own_field(where, text):
                    found.append(self.problem(where, f"is a name from the answer's schema ({text.strip()[:40]!r}), "
                                                     "not content"))
        for spec in self.names:
            for where, name in walk(data, spec):
                if isinstance(name, str) and not name_in(name, self.source):
                    found.append(self.problem(where, f"names {name[:60]!r}, which the source does not mention"))
        return found

    def language_problems(self, value: BaseModel | dict) -> list[Problem]:
        """A soft problem when the declared texts, read together, are surely in another language
        than ``language``. Blocking (the detector)."""
        if self.language is None:
            return []
        data = value.model_dump() if isinstance(value, BaseModel) else value
        text = "\n".join(t for spec in self.texts for _, t in walk(data, spec.rstrip("?")) if isinstance(t, str))
        found = languages.other_than(text, self.language)
        if found is None:
            return []
        return [Problem("the answer", f"is written in {languages.named(found)}, not in "
                                      f"{languages.named(self.language)} as asked", soft=True)]

    def cut_values(self, value: BaseModel | dict, fragment: str) -> list[Problem]:
        """Problems for the string values that are ``fragment``: the text a cut-off answer ended in."""
        data = value.model_dump() if isinstance(value, BaseModel) else value
        frag = fragment.strip()
        return [self.problem(where, f"is cut off where the answer ended ({frag[-30:]!r})")
                for where, text in strings(data) if frag and text.strip() == frag]

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
