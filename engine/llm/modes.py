"""Structured-output modes: what each sends, how a refusal of one is recognised, and the mode
each endpoint and model is known to take, remembered in the database.

The ladder, strongest first:

    json_schema       response_format json_schema, strict (OpenAI, vLLM, Ollama, llama-server)
    json_object       response_format json_object carrying ``"schema"`` (llama-cpp-python and
                      others turn it into a grammar), plus the schema in the prompt
    json_object_bare  response_format json_object alone, the schema in the prompt
    prompt            no response_format, the schema in the prompt

Servers refuse a mode in many ways: OpenAI-style 400s, 422s, and llama-cpp-python's HTTP 500
carrying a pydantic message ("Input should be 'text' or 'json_object'"). So a refusal is read
from the error text, whatever the status; a failure whose text says nothing about the
response format (a bare 500, a timeout) is a server failure and is retried as such.

A mode learnt is stored per endpoint and model in ``llm_modes`` and read back on first use, so
a restart does not send a request the endpoint is known to refuse.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone

import openai

from engine.db import Database

log = logging.getLogger(__name__)

MODES = ("json_schema", "json_object", "json_object_bare", "prompt")

# What a configured ``[llm] json_mode`` may fall back through: "auto" the whole ladder, a fixed
# "json_object" only to the same mode without the schema field, any other fixed mode nowhere.
LADDERS = {"auto": MODES, "json_schema": ("json_schema",), "json_object": ("json_object", "json_object_bare"),
           "prompt": ("prompt",)}

# Words of an error that is about the requested response format.
_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object", "json schema",
                 "json mode", "structured output", "guided_json", "grammar")
# Words of an error that is about something else than the format (checked first).
_NOT_FORMAT = ("context length", "context_length", "maximum context", "too many tokens",
               "exceed context window", "model_not_found", "does not exist")


def _error_text(err: openai.APIStatusError) -> str:
    parts = [str(err)]
    try:
        parts.append(err.response.text)
    except Exception:  # a streamed or closed body: the message is enough
        pass
    return " ".join(parts).lower()


def refusal(err: openai.APIStatusError) -> str:
    """The status and the server's own message, without the client's wrapping."""
    body = err.body
    message = body.get("message") if isinstance(body, dict) else None
    text = " ".join(str(message if message is not None else err).split())
    return f"{err.status_code}: {text[:300]}"


def rejects_format(err: BaseException) -> bool:
    """Does this error say the endpoint cannot do the response format it was asked for?

    Any status counts when the text names the format; a plain 400/422 on a structured request
    counts too (many servers say no more than "invalid request"), unless it names another cause
    such as the context length or an unknown model."""
    if not isinstance(err, openai.APIStatusError) or err.status_code in (401, 403, 429):
        return False
    text = _error_text(err)
    if any(w in text for w in _NOT_FORMAT):
        return False
    return any(w in text for w in _FORMAT_WORDS) or err.status_code in (400, 422)


def weaker(mode: str, json_mode: str) -> str | None:
    """The next mode down the configured ladder, or None at its bottom."""
    ladder = LADDERS[json_mode]
    i = ladder.index(mode)
    return ladder[i + 1] if i + 1 < len(ladder) else None


class ModeMemory:
    """The structured mode known to work, per model, for one endpoint; persisted when a
    database is given. ``get`` reads the stored modes on its first call."""

    def __init__(self, endpoint: str, db: Database | None = None):
        self.endpoint = endpoint
        self.db = db
        self._modes: dict[str, str] = {}
        self._loaded = db is None
        self._lock = asyncio.Lock()

    async def _load(self) -> None:
        async with self._lock:
            if self._loaded or self.db is None:   # no database: nothing stored to read
                return
            rows = await self.db.fetchall("SELECT model, mode FROM llm_modes WHERE endpoint=?", (self.endpoint,))
            for row in rows:
                if row["mode"] in MODES:
                    self._modes.setdefault(row["model"], row["mode"])
            self._loaded = True

    async def get(self, model: str) -> str | None:
        """The mode learnt for ``model``, or None when none was learnt yet."""
        if not self._loaded:
            await self._load()
        return self._modes.get(model)

    async def learn(self, model: str, mode: str, reason: str) -> bool:
        """Record that ``model`` needs ``mode``. A weaker mode already known wins (a request
        sent before another one learnt it must not bring a refused mode back); returns
        whether anything changed."""
        known = await self.get(model)
        if known is not None and MODES.index(known) >= MODES.index(mode):
            return False
        self._modes[model] = mode
        log.warning("%s refused a structured-output mode for %s (%s); using %s from now on",
                    self.endpoint, model, reason, mode)
        if self.db is not None:
            await self.db.execute(
                "INSERT INTO llm_modes(endpoint, model, mode, reason, learned_at) VALUES (?,?,?,?,?)"
                " ON CONFLICT(endpoint, model) DO UPDATE SET mode=excluded.mode, reason=excluded.reason,"
                " learned_at=excluded.learned_at",
                (self.endpoint, model, mode, reason[:500], datetime.now(timezone.utc).isoformat(timespec="seconds")))
        return True
