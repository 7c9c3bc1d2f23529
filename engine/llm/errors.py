"""Errors of the LLM layer. Each is a JobError, so a job that meets one fails with its text."""
from __future__ import annotations

from engine.jobs import JobError
from engine.llm.failures import describe


class LLMError(JobError):
    """The LLM could not give a usable answer (after retries and fallbacks)."""


class LLMNotConfigured(LLMError):
    """No endpoint is configured ([llm] base_url is empty)."""


class BudgetExceeded(LLMError):
    """A job or scope has spent its budget; no further requests are sent for it."""


class InvalidAnswer(LLMError):
    """The LLM answered, but never in the required shape; callers may fall back to defaults."""


class RequestRejected(LLMError):
    """The endpoint refused a request: a 4xx other than authentication and rate limits, or a
    refusal of the requested response format whatever its status."""

    def __init__(self, cause, endpoint: str = "", key_env: str = ""):
        super().__init__(describe(cause, endpoint or "(unknown)", key_env=key_env))
        self.cause = cause
        self.status_code = cause.status_code
