"""LLM failures in one human sentence: what happened, at which endpoint, and what to check.

The openai client's own text is ``Error code: 500 - {'error': {'message': ...}}``: a raw dict a
chat user cannot act on. ``describe`` turns any failure of a request (a status error, a refused
connection, a timeout, an answer that is no JSON, or anything else) into one sentence naming
the status, the endpoint and the setting or server to check. It is used by the LLM client (the
bot's requests) and by the run's child process (camel's requests), so the same failure reads
the same everywhere.
"""
from __future__ import annotations

import json

import openai

from engine.i18n import _
from engine.words import plural


def server_message(err: BaseException, limit: int = 160) -> str:
    """The server's own words of a status error (its ``error.message``), on one line."""
    body = getattr(err, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if message is None and isinstance(body, str):
        message = body
    text = " ".join(str(message or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tries(tries: int) -> str:
    return plural(tries, " after {n} try", " after {n} tries") if tries > 1 else ""


def describe(err: BaseException, endpoint: str, *, tries: int = 1, timeout_s: float | None = None,
             key_env: str = "") -> str:
    """One sentence for a failed request to ``endpoint`` (tried ``tries`` times), in the current
    language (engine.i18n; the run's child writes English)."""
    if isinstance(err, openai.APITimeoutError):  # a subclass of APIConnectionError: test it first
        within = _(" within {seconds} s", seconds=f"{timeout_s:g}") if timeout_s else ""
        return _("The LLM endpoint {endpoint} did not answer{within}{tries}: check the server's load, or raise "
                 "[llm] timeout_s.", endpoint=endpoint, within=within, tries=_tries(tries))
    if isinstance(err, openai.APIConnectionError):
        return _("The LLM endpoint {endpoint} could not be reached{tries}: check that the server is running and "
                 "that [llm] base_url is right.", endpoint=endpoint, tries=_tries(tries))
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        said = server_message(err)
        detail = f"HTTP {status}" + (f": {said}" if said else "")
        if status in (401, 403):
            key = _("the environment variable {name}", name=key_env) if key_env else _("the API key")
            return _("The LLM endpoint {endpoint} refused the API key ({detail}): check {key}.", endpoint=endpoint,
                     detail=detail, key=key)
        if status == 429:
            if tries > 1:
                return _("The LLM endpoint {endpoint} kept refusing{tries} with {detail}: wait a little, or lower "
                         "[llm] max_concurrency.", endpoint=endpoint, tries=_tries(tries), detail=detail)
            return _("The LLM endpoint {endpoint} refused with {detail}: wait a little, or lower [llm] "
                     "max_concurrency.", endpoint=endpoint, detail=detail)
        if status >= 500:
            if tries > 1:
                return _("The LLM endpoint {endpoint} kept failing{tries} ({detail}): check that the server is "
                         "healthy and read its log.", endpoint=endpoint, tries=_tries(tries), detail=detail)
            return _("The LLM endpoint {endpoint} failed ({detail}): check that the server is healthy and read its "
                     "log.", endpoint=endpoint, detail=detail)
        if status == 404:
            return _("The LLM endpoint {endpoint} refused the request ({detail}): check [llm] model and base_url.",
                     endpoint=endpoint, detail=detail)
        return _("The LLM endpoint {endpoint} refused the request ({detail}): check the server's log and [llm] "
                 "model.", endpoint=endpoint, detail=detail)
    if isinstance(err, json.JSONDecodeError):
        return _("The LLM endpoint {endpoint} answered with something that is not JSON{tries}: check that [llm] "
                 "base_url is an OpenAI-compatible endpoint and that no proxy in between answers with its own pages.",
                 endpoint=endpoint, tries=_tries(tries))
    text = " ".join(str(err).split())[:160]
    return _("The LLM endpoint {endpoint} failed ({error}).", endpoint=endpoint,
             error=type(err).__name__ + (": " + text if text else ""))
