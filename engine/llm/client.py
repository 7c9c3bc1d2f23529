"""LLMClient: every LLM request of the bot goes through here.

- ``structured(Model, messages)`` returns a validated pydantic instance. It asks with strict
  ``json_schema`` first; an endpoint that refuses that, with whatever status, is asked down the
  ladder of ``modes`` (``json_object`` carrying the schema, bare ``json_object``, plain
  prompting, the schema in the prompt for all three) at once, without retrying the refused
  mode, and the mode that worked is stored per endpoint and model. Broken or truncated JSON
  is repaired (json-repair), unless the caller passes ``repair=False`` (then it counts as
  invalid); an answer that still does not validate is asked again with the
  validation errors.
- ``chat(messages)`` returns the text; ``complete(messages, tools=...)`` the raw assistant
  message (tool calls included) for agents that call tools natively.
- 429, 5xx, timeouts, connection errors and answers that are no JSON are retried with backoff (tenacity) honouring
  Retry-After; the openai client's own retries are off so there is one policy. While a person
  waits for the answer (``person_waiting()``: /ask, /interview) the retries are
  ``[llm] interactive_retries`` with at most a second between them, so a dead endpoint is
  reported in seconds, not after half a minute.
- Every failure is one human sentence (``failures.describe``: status, endpoint, what to check).
- ``structured(..., checks=ContentChecks(...))`` also checks the answer's content (truncation,
  placeholders, names not in the source; see ``content_checks``): an answer that fails is asked
  again with the problems; when it still fails, a check that names an item list keeps the good
  items and drops the bad ones (one persona), otherwise the answer is refused (one chunk).
- An answer in another language than asked (``chat(language=...)``, ``ContentChecks.language``;
  engine.language) is asked again once (``chat``) or within the validation retries
  (``structured``), with the correction; one still in another language is kept, logged.
- Tokens and estimated cost are counted per job (or, for work that is not a job, per
  ``activity``), scope and person (engine.llm.usage); budget caps raise BudgetExceeded, a
  JobError, so the job stops with a message.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import json
import logging
import time
from typing import Any, Sequence, TypeVar, cast

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from engine import language as languages
from engine.config import LLMSection, secret
from engine.db import Database
from engine.i18n import _
from engine.llm.content_checks import ContentChecks
from engine.llm.errors import InvalidAnswer, LLMError, LLMNotConfigured, RequestRejected
from engine.llm.failures import describe
from engine.llm.modes import LADDERS, ModeMemory, refusal, rejects_format, weaker
from engine.llm.schema import coerce, parse_answer, schema_instruction, schema_name, strict_schema
from engine.llm.usage import Usage, UsageLedger
from engine.offload import run_cpu
from engine.trust import Trust
from engine.words import plural

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
Messages = Sequence[dict[str, Any]]

_PERSON_WAITING: contextvars.ContextVar[bool] = contextvars.ContextVar("llm_person_waiting", default=False)
_WAITING_MAX_WAIT_S = 1.0


@contextlib.contextmanager
def person_waiting():
    """Requests made inside this block have someone waiting on them: few retries, short waits."""
    token = _PERSON_WAITING.set(True)
    try:
        yield
    finally:
        _PERSON_WAITING.reset(token)


def _transient(err: BaseException) -> bool:
    # an answer that is no JSON at all (a proxy's error page sent with 200) is a flapping
    # endpoint too: the openai client lets json's error out of its parsing
    return isinstance(err, (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                            openai.APIConnectionError, json.JSONDecodeError)) or (
        isinstance(err, openai.APIStatusError) and err.status_code >= 500)


def retry_after(err: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After / retry-after-ms), if it said."""
    response = getattr(err, "response", None)
    if response is None:
        return None
    headers = response.headers
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class _Backoff:
    """Exponential backoff with jitter, replaced by the server's Retry-After when it gives one."""

    def __init__(self, max_wait: float):
        self.max_wait = max_wait
        self.fallback = wait_exponential_jitter(multiplier=0.5, jitter=0.5, max=max(max_wait, 0.5))

    def __call__(self, state) -> float:
        asked = retry_after(state.outcome.exception()) if state.outcome else None
        wait = asked if asked is not None else self.fallback(state)
        return min(wait, self.max_wait)


class LLMClient:
    def __init__(self, config: LLMSection, db: Database | None = None, *, api_key: str | None = None,
                 trust: Trust | None = None):
        if not config.configured:
            raise LLMNotConfigured(_("no LLM is configured: set [llm] base_url in config.toml"))
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        key = api_key or secret(config.api_key_env) or "not-needed"  # local servers take any key
        self._client = AsyncOpenAI(base_url=self.base_url, api_key=key, timeout=config.timeout_s,
                                   max_retries=0)
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self.usage = UsageLedger(config, db, trust)
        self.modes = ModeMemory(self.base_url, db)

    async def close(self) -> None:
        await self._client.close()

    def model_name(self, fast: bool = False) -> str:
        return (self.config.fast_model or self.config.model) if fast else self.config.model

    async def mode_for(self, model: str) -> str:
        """The structured mode the next request for ``model`` uses: the one learnt for this
        endpoint, if the configured ``json_mode`` allows it, else the configured ladder's first."""
        ladder = LADDERS[self.config.json_mode]
        learnt = await self.modes.get(model)
        return learnt if learnt in ladder else ladder[0]

    def may_spend(self, scope: str) -> bool:
        """Whether requests for ``scope`` may be made at all (not in a stranger's direct message)."""
        return self.usage.spends_in(scope)

    async def job_usage(self, job: str | None) -> Usage:
        return await self.usage.for_job(job)

    # -- public API ----------------------------------------------------------------------

    async def chat(self, messages: Messages, *, fast: bool = False, job: str | None = None,
                   scope: str | None = None, tools: list[dict] | None = None, activity: str | None = None,
                   language: str | None = None, **kwargs: Any) -> str:
        """``job``: the background job the request is for (its caps hold); work that is not a job
        names its ``activity`` instead ('memory.ask'), under which its usage is filed.
        ``language``: the language the messages ask the answer in (engine.language): an answer
        surely in another is asked again once with the correction, and the second answer is
        kept whatever its language."""
        message = await self.complete(messages, fast=fast, job=job, scope=scope, tools=tools, activity=activity,
                                      **kwargs)
        text = message.content or ""
        if language is None or not text.strip() or message.tool_calls:
            return text
        found = await run_cpu(languages.other_than, text, language)
        if found is None:
            return text
        log.info("an answer came in %s where %s was asked: asked again", found, language)
        again = await self.complete([*messages, {"role": "assistant", "content": text[:4000]},
                                     {"role": "user", "content": f"You wrote that in {languages.named(found)}. "
                                                                 "Write the same answer in "
                                                                 f"{languages.named(language)}, nothing else."}],
                                    fast=fast, job=job, scope=scope, tools=tools, activity=activity, **kwargs)
        return again.content or text

    async def complete(self, messages: Messages, *, tools: list[dict] | None = None, fast: bool = False,
                       job: str | None = None, scope: str | None = None, activity: str | None = None,
                       **kwargs: Any) -> ChatCompletionMessage:
        """One chat completion; returns the assistant message with any tool calls."""
        if tools:
            kwargs["tools"] = tools
        response = await self._request(list(messages), self.model_name(fast), job, scope, activity, **kwargs)
        return response.choices[0].message

    async def structured(self, model_cls: type[T], messages: Messages, *, fast: bool = False,
                         job: str | None = None, scope: str | None = None, repair: bool = True,
                         checks: ContentChecks | None = None, activity: str | None = None, **kwargs: Any) -> T:
        """Ask for an answer that validates as ``model_cls`` and passes ``checks`` and return it.
        ``repair`` False: broken or truncated JSON is not mended but asked again like any invalid answer."""
        model = self.model_name(fast)
        checks = checks or ContentChecks()
        history = list(messages)
        errors = ""
        attempt = 0
        candidates: list[tuple[T, list]] = []   # answers of the right shape (items may be dropped), with problems
        while attempt <= self.config.validation_retries:
            mode = await self.mode_for(model)
            try:
                response = await self._request(self._with_format(history, model_cls, mode), model, job, scope,
                                               activity, **self._format_args(model_cls, mode), **kwargs)
            except RequestRejected as err:
                fallback = weaker(mode, self.config.json_mode)
                if fallback is not None and rejects_format(err.cause):
                    await self.modes.learn(model, fallback, f"{mode} refused with {refusal(err.cause)}")
                    continue
                raise
            attempt += 1
            choice = response.choices[0]
            content = choice.message.content or ""
            try:
                data, cut = parse_answer(content, repair=repair)
                data = coerce(model_cls, data)
                value = model_cls.model_validate(data)
            except (ValidationError, ValueError) as err:
                errors = _describe(err)
                # items broken in shape (the last one of a cut-off answer) fail alone, like bad content
                if isinstance(err, ValidationError) and (salvaged := checks.without_broken_items(model_cls, data, err)):
                    candidates.append((cast(T, salvaged), checks.problems(salvaged)))
            else:
                problems = checks.problems(value) + (checks.cut_values(value, cut) if cut else [])
                if not problems and checks.language is not None:
                    problems = await run_cpu(checks.language_problems, value)
                if not problems:
                    return value
                candidates.append((value, problems))
                errors = "; ".join(str(p) for p in problems[:8])
            note = (" Your previous answer was cut off: keep it shorter." if choice.finish_reason == "length"
                    else "")
            history = [*history, {"role": "assistant", "content": content[:4000]},
                       {"role": "user", "content": f"That answer was not valid: {errors}.{note} "
                                                   "Reply again with the complete, corrected JSON object only."}]
            log.info("invalid structured answer for %s: %s", model_cls.__name__, errors)
        soft = [value for value, problems in candidates if problems and all(p.soft for p in problems)]
        if soft:   # whole, only not as asked (its language): better than none
            log.warning("%s: kept after %d tries with: %s", model_cls.__name__, attempt, errors)
            return soft[-1]
        kept = [k for c in candidates if (k := checks.keep_good(*c)) is not None]
        if kept:  # the answer that keeps the most items
            best = max(kept, key=lambda k: sum(len(getattr(k[0], items)) for items in checks.items))
            log.warning("%s: dropped %d unusable item(s) after %d tries", model_cls.__name__, best[1], attempt)
            log.info("%s: the last answer's problems: %s", model_cls.__name__, errors)   # they quote the content
            return cast(T, best[0])
        raise InvalidAnswer(plural(self.config.validation_retries + 1,
                                   "the LLM gave no valid {answer} after {n} try (last problem: {problem})",
                                   "the LLM gave no valid {answer} after {n} tries (last problem: {problem})",
                                   answer=model_cls.__name__, problem=errors))

    # -- internals -----------------------------------------------------------------------

    @staticmethod
    def _format_args(model_cls: type[BaseModel], mode: str) -> dict[str, Any]:
        if mode == "json_schema":
            return {"response_format": {"type": "json_schema", "json_schema": {
                "name": schema_name(model_cls), "schema": strict_schema(model_cls), "strict": True}}}
        if mode == "json_object":
            return {"response_format": {"type": "json_object", "schema": strict_schema(model_cls)}}
        if mode == "json_object_bare":
            return {"response_format": {"type": "json_object"}}
        return {}

    @staticmethod
    def _with_format(history: list[dict], model_cls: type[BaseModel], mode: str) -> list[dict]:
        if mode == "json_schema":
            return history
        # json_object needs the word JSON in the prompt; every weaker mode needs the schema there.
        # It joins the leading system message: some chat templates refuse a system message later on.
        instruction = schema_instruction(model_cls)
        if history and history[0].get("role") == "system" and isinstance(history[0].get("content"), str):
            return [{**history[0], "content": f"{history[0]['content']}\n\n{instruction}"}, *history[1:]]
        return [{"role": "system", "content": instruction}, *history]

    async def _request(self, messages: list[dict], model: str, job: str | None, scope: str | None,
                       activity: str | None = None, **kwargs: Any) -> ChatCompletion:
        await self.usage.check(job, scope)
        kwargs.setdefault("temperature", self.config.temperature)
        kwargs.setdefault("max_tokens", self.config.max_tokens)
        # a refused response format is final, whatever its status: the caller steps down a mode
        formatted = "response_format" in kwargs

        def refused_format(err: BaseException) -> bool:
            return formatted and rejects_format(err)

        waiting = _PERSON_WAITING.get()
        tries = (min(self.config.interactive_retries, self.config.max_retries) if waiting
                 else self.config.max_retries) + 1
        max_wait = min(self.config.retry_max_wait_s, _WAITING_MAX_WAIT_S) if waiting else self.config.retry_max_wait_s
        retrying = AsyncRetrying(
            stop=stop_after_attempt(tries),
            wait=_Backoff(max_wait),
            retry=retry_if_exception(lambda err: _transient(err) and not refused_format(err)),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    async with self._slots:
                        response = await self._client.chat.completions.create(
                            model=model, messages=messages,  # type: ignore[arg-type]  # dicts of their shape
                            **kwargs)
        except openai.AuthenticationError as err:
            raise LLMError(describe(err, self.base_url, key_env=self.config.api_key_env)) from None
        except Exception as err:
            if refused_format(err) or (isinstance(err, openai.APIStatusError) and not _transient(err)):
                raise RequestRejected(err, self.base_url, self.config.api_key_env) from None
            if _transient(err):
                raise LLMError(describe(err, self.base_url, tries=tries, timeout_s=self.config.timeout_s)) from None
            raise
        if not response.choices:
            raise LLMError(_("the LLM endpoint answered without any choices"))
        prompt, completion = _tokens(response, messages)
        await self.usage.record(model, prompt, completion, job, scope, activity=activity)
        return response


def _tokens(response: ChatCompletion, messages: list[dict]) -> tuple[int, int]:
    if response.usage is not None:
        return response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0
    # Some local servers omit usage: estimate about 4 characters per token.
    sent = sum(len(json.dumps(m.get("content", ""))) for m in messages)
    got = len(response.choices[0].message.content or "")
    return sent // 4, got // 4


def _describe(err: Exception) -> str:
    if isinstance(err, ValidationError):
        parts = []
        for e in err.errors()[:8]:
            where = ".".join(str(p) for p in e["loc"]) or "answer"
            parts.append(f"{where}: {e['msg']}")
        return "; ".join(parts)
    return str(err)
