"""LLM failures in one human sentence: what happened, at which endpoint, and what to check.

The openai client's own text is ``Error code: 500 - {'error': {'message': ...}}``: a raw dict a
chat user cannot act on. ``describe`` turns any failure of a request (a status error, a refused
connection, a timeout, or anything else) into one sentence naming the status, the endpoint and
the setting or server to check. It is used by the LLM client (the bot's requests) and by the
run's child process (camel's requests), so the same failure reads the same everywhere.
"""
from __future__ import annotations

import openai


def server_message(err: BaseException, limit: int = 160) -> str:
    """The server's own words of a status error (its ``error.message``), on one line."""
    body = getattr(err, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if message is None and isinstance(body, str):
        message = body
    text = " ".join(str(message or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tries(tries: int) -> str:
    return f" after {tries} tries" if tries > 1 else ""


def describe(err: BaseException, endpoint: str, *, tries: int = 1, timeout_s: float | None = None,
             key_env: str = "") -> str:
    """One sentence for a failed request to ``endpoint`` (tried ``tries`` times)."""
    where = f"The LLM endpoint {endpoint}"
    if isinstance(err, openai.APITimeoutError):  # a subclass of APIConnectionError: test it first
        limit = f" within {timeout_s:g} s" if timeout_s else ""
        return (f"{where} did not answer{limit}{_tries(tries)}: check the server's load, "
                f"or raise [llm] timeout_s.")
    if isinstance(err, openai.APIConnectionError):
        return (f"{where} could not be reached{_tries(tries)}: check that the server is running "
                f"and that [llm] base_url is right.")
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        said = server_message(err)
        detail = f"HTTP {status}" + (f": {said}" if said else "")
        if status in (401, 403):
            key = f"the environment variable {key_env}" if key_env else "the API key"
            return f"{where} refused the API key ({detail}): check {key}."
        if status == 429:
            refused = f"kept refusing{_tries(tries)}" if tries > 1 else "refused"
            return f"{where} {refused} with {detail}: wait a little, or lower [llm] max_concurrency."
        if status >= 500:
            failed = f"kept failing{_tries(tries)}" if tries > 1 else "failed"
            return f"{where} {failed} ({detail}): check that the server is healthy and read its log."
        if status == 404:
            return f"{where} refused the request ({detail}): check [llm] model and base_url."
        return f"{where} refused the request ({detail}): check the server's log and [llm] model."
    text = " ".join(str(err).split())[:160]
    return f"{where} failed ({type(err).__name__}{': ' + text if text else ''})."
