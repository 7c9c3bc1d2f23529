"""From a pydantic model to what each JSON mode sends, and from an answer back to the model.

Strict ``json_schema`` needs every object closed (``additionalProperties: false``) with every
property listed as required, and rejects ``default``; pydantic's schema is rewritten to fit.
The other modes put the schema into the prompt instead. Answers are parsed leniently: code
fences and prose around the JSON are dropped and malformed or truncated JSON is repaired; an
answer cut off inside a string reports the cut text, so the caller can refuse that value.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any

import json_repair
from pydantic import BaseModel

_DROP = {"default", "title", "examples"}


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = copy.deepcopy(model.model_json_schema())

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in _DROP & set(node):
                del node[key]
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for key, value in node.items():
                if key in ("properties", "$defs"):  # maps of names: the names are not keywords
                    for sub in value.values():
                        walk(sub)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def schema_name(model: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", model.__name__)[:64] or "answer"


def schema_instruction(model: type[BaseModel]) -> str:
    return ("Answer with one JSON object only, no prose and no code fences, that conforms to this "
            "JSON schema:\n" + json.dumps(strict_schema(model), separators=(",", ":")))


_FENCE = re.compile(r"```(?:json)?\s*(.*?)(?:```|$)", re.S)


def parse_answer(text: str, repair: bool = True) -> tuple[Any, str | None]:
    """Best-effort parse of an answer that should be JSON (repairs broken or truncated JSON),
    and the text of the string it was cut off in, if it ended inside one. ``repair`` False: broken
    JSON raises ValueError instead (for callers to whom such text is garbage)."""
    text = (text or "").strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start > 0:
        text = text[start:]
    if not text:
        return None, None
    try:
        return json.loads(text), None
    except json.JSONDecodeError as err:
        if not repair:
            raise ValueError(f"the answer is not well-formed JSON ({err.msg} at character {err.pos})") from None
        return json_repair.loads(text), open_string(text)


def open_string(text: str) -> str | None:
    """The content of the double-quoted string ``text`` ends inside, or None."""
    start, escaped = None, False
    for i, ch in enumerate(text):
        if start is not None and escaped:
            escaped = False
        elif start is not None and ch == "\\":
            escaped = True
        elif ch == '"':
            start = None if start is not None else i + 1
    return None if start is None else text[start:]


def coerce(model: type[BaseModel], data: Any) -> Any:
    """Undo a common slip of weaker models: a bare list where the schema wraps it in an object
    with a single list field (``[...]`` for ``{"personas": [...]}``)."""
    if isinstance(data, list):
        lists = [name for name, f in model.model_fields.items()
                 if getattr(f.annotation, "__origin__", None) is list]
        if len(lists) == 1 and len(model.model_fields) == 1:
            return {lists[0]: data}
    return data
