"""A fake OpenAI-compatible endpoint on 127.0.0.1 for the real openai client (and camel/oasis).

It runs aiohttp in a thread of its own, so it answers whether the test is async, blocks, or
talks to it from a child process. A test sets ``server.responder`` to decide each answer:
it receives the request body (a dict) and returns one of
  - a str: the assistant's message content,
  - a dict: a whole chat.completion object (see ``completion``),
  - a ``Raw``: status, headers, body and delay chosen freely (429, 500, broken JSON, stalls).
Every request body is kept in ``server.requests``, its Authorization header in ``server.authorizations``,
unless ``keep_requests`` is False (a long benchmark: thousands of growing prompts would hold gigabytes).
"""
from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web


@dataclass
class Raw:
    status: int = 200
    body: str | dict = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(content: str | None = None, tool_calls: list[dict] | None = None, model: str = "fake-model",
               prompt_tokens: int = 10, completion_tokens: int = 5, finish_reason: str | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": tc.get("id", f"call_{i}"), "type": "function",
             "function": {"name": tc["name"], "arguments": tc["arguments"] if isinstance(tc["arguments"], str)
                          else json.dumps(tc["arguments"])}}
            for i, tc in enumerate(tool_calls)]
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


Responder = Callable[[dict], "str | dict | Raw"]


class FakeOpenAI:
    def __init__(self, responder: Responder | None = None, keep_requests: bool = True):
        self.responder: Responder = responder or (lambda body: "ok")
        self.keep_requests = keep_requests
        self.requests: list[dict] = []
        self.authorizations: list[str] = []
        self.dropped = 0   # requests whose client closed the connection before the body was read
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "bad json"}}, status=400)
        except ConnectionResetError:  # the client went away mid-request (its timeout, or it was killed)
            with self._lock:
                self.dropped += 1
            return web.Response(status=499)
        if self.keep_requests:
            with self._lock:
                self.requests.append(body)
                self.authorizations.append(request.headers.get("Authorization", ""))
        answer = self.responder(body)
        if isinstance(answer, Raw):
            if answer.delay:
                await asyncio.sleep(answer.delay)
            text = answer.body if isinstance(answer.body, str) else json.dumps(answer.body)
            return web.Response(status=answer.status, text=text, headers=answer.headers,
                                content_type="application/json")
        if isinstance(answer, str):
            answer = completion(answer, model=body.get("model", "fake-model"))
        return web.json_response(answer)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def start(self) -> "FakeOpenAI":
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            app = web.Application(client_max_size=64 * 1024 * 1024)
            for prefix in ("/v1", ""):
                app.router.add_post(f"{prefix}/chat/completions", self._chat)
                app.router.add_get(f"{prefix}/models", self._models)
            # a stalled answer (Raw.delay) is cut off at stop rather than waited for
            self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started TCP site's server
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="fake-openai", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(10)

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# What llama-cpp-python's server (0.3.36, FastAPI 0.165) answers to ``response_format: {"type":
# "json_schema", ...}``: its request model only knows "text" and "json_object", and its error
# handler turns the validation error into an HTTP 500 (copied from a real answer).
LLAMA_CPP_JSON_SCHEMA_REFUSAL = Raw(500, {"error": {
    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
               "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
               "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line 376, "
               "in create_chat_completion\n    POST /v1/chat/completions",
    "type": "internal_server_error", "param": None, "code": None}})

# What a server with a closed request model answers to a json_object format carrying "schema".
SCHEMA_FIELD_REFUSAL = Raw(400, {"error": {
    "message": "Invalid 'response_format': unrecognized field 'schema' for type 'json_object'.",
    "type": "invalid_request_error", "param": "response_format", "code": None}})


class StructuredFormats:
    """An endpoint's handling of response formats in front of ``answer`` (another responder):
    json_schema is refused like llama-cpp-python does (HTTP 500 with its pydantic message), a
    json_object format carrying "schema" is served unless ``schema_field`` is False (then it is
    refused with a 400), and every format named in ``refuse`` gets a 400 too."""

    def __init__(self, answer: Responder, schema_field: bool = True, refuse: frozenset[str] = frozenset()):
        self.answer = answer
        self.schema_field = schema_field
        self.refuse = refuse

    def __call__(self, body: dict) -> "str | dict | Raw":
        fmt = body.get("response_format") or {}
        kind = fmt.get("type")
        if kind == "json_schema":
            return LLAMA_CPP_JSON_SCHEMA_REFUSAL
        if kind == "json_object" and "schema" in fmt and not self.schema_field:
            return SCHEMA_FIELD_REFUSAL
        if kind in self.refuse:
            return Raw(400, {"error": {"message": f"response_format {kind} is not supported"}})
        return self.answer(body)


def tool_sequence_problem(messages: list[dict]) -> str:
    """OpenAI's rule: every assistant tool call is answered by a tool message with its id,
    right after it, and no tool message comes without its call. '' when the rule holds."""
    open_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_ids:
                return f"messages[{i}]: tool message without a preceding tool call"
            open_ids.discard(m.get("tool_call_id"))
            continue
        if open_ids:
            return f"messages[{i}]: tool calls {sorted(open_ids)} were not answered"
        if role == "assistant":
            open_ids = {tc["id"] for tc in m.get("tool_calls") or []}
    return f"tool calls {sorted(open_ids)} were not answered" if open_ids else ""


class SocialResponder:
    """Answers camel-oasis agents like a cooperative model would.

    A request that offers tools gets one valid tool call, cycling through create_post,
    like_post / create_comment (on a post id seen in the prompt) and do_nothing; a request
    without tools (an interview) gets a text answer naming the question. A conversation that
    breaks OpenAI's tool-call sequence rule gets OpenAI's 400 (and lands in ``rejected``).
    ``delay`` slows every answer (to keep a run busy while a test stops or kills it). Once
    ``hold_after`` requests have been served, later ones are held (answered with a 503 only after
    30 s; counted in ``held``), so a test can kill a run at a moment when no answer is on its way.
    """

    def __init__(self, delay: float = 0.0, hold_after: int | None = None):
        self.delay = delay
        self.hold_after = hold_after
        self.tool_requests = 0
        self.text_requests = 0
        self.held = 0
        self.rejected: list[str] = []
        self._lock = threading.Lock()

    @property
    def served(self) -> int:
        """Requests answered with a completion (or, with a ``delay``, about to be)."""
        return self.tool_requests + self.text_requests

    def __call__(self, body: dict) -> "dict | Raw":
        with self._lock:
            if self.hold_after is not None and self.served >= self.hold_after:
                self.held += 1
                return Raw(503, {"error": {"message": "held"}}, delay=30)
        problem = tool_sequence_problem(body.get("messages") or [])
        if problem:  # what OpenAI answers to a conversation with a broken tool-call sequence
            self.rejected.append(problem)
            return Raw(400, {"error": {"message": problem, "type": "invalid_request_error"}})
        answer = self._answer(body)
        return Raw(200, answer, delay=self.delay) if self.delay else answer

    def _answer(self, body: dict) -> dict:
        messages = body.get("messages") or []
        last = str(messages[-1].get("content", "")) if messages else ""
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        if not tools:
            with self._lock:
                self.text_requests += 1
            return completion(f"My view on '{last[:60]}': I stand by what I posted.")
        with self._lock:
            n = self.tool_requests
            self.tool_requests += 1
        post_ids = [int(x) for x in re.findall(r'"post_id":\s*(\d+)', last)]
        choice = ("create_post", "react", "do_nothing")[n % 3]
        if choice == "react" and post_ids:
            pid = post_ids[n % len(post_ids)]
            if "create_comment" in tools and n % 2:
                return completion(tool_calls=[{"id": f"call_{n}", "name": "create_comment",
                                               "arguments": {"post_id": pid, "content": f"Reply {n}"}}])
            if "like_post" in tools:
                return completion(tool_calls=[{"id": f"call_{n}", "name": "like_post",
                                               "arguments": {"post_id": pid}}])
        if choice != "do_nothing" and "create_post" in tools:
            return completion(tool_calls=[{"id": f"call_{n}", "name": "create_post",
                                           "arguments": {"content": f"Post {n}: my take on the news"}}])
        return completion(tool_calls=[{"id": f"call_{n}", "name": "do_nothing", "arguments": {}}])


def sent_chars(body: dict) -> int:
    """Characters a request sends the model: message texts, tool calls and tool schemas."""
    chars = 0
    for m in body.get("messages") or []:
        chars += len(m.get("content") or "") if isinstance(m.get("content"), (str, type(None))) else len(
            json.dumps(m["content"]))
        for call in m.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"].get("arguments") or "")
    return chars + (len(json.dumps(body["tools"])) if body.get("tools") else 0)


class Metered:
    """Reports usage as a tokenizer roughly would (about 4 characters per token) for whatever
    ``answer`` (another responder) replies: prompt tokens from what the request sent, completion
    tokens from what the answer says. Other fakes report a token count fixed per answer."""

    def __init__(self, answer: Responder):
        self.answer = answer

    def __call__(self, body: dict) -> "str | dict | Raw":
        reply = self.answer(body)
        if isinstance(reply, str):
            reply = completion(reply, model=body.get("model", "fake-model"))
        whole = reply.body if isinstance(reply, Raw) else reply
        if isinstance(whole, dict) and whole.get("choices"):
            message = whole["choices"][0]["message"]
            got = len(message.get("content") or "") + sum(
                len(c["function"]["name"]) + len(c["function"]["arguments"]) for c in message.get("tool_calls") or [])
            prompt, done = sent_chars(body) // 4 + 1, got // 4 + 1
            whole["usage"] = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
        return reply
