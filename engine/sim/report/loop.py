"""The report agent's bounded tool-calling loop, shared by the report writer and report chat.

While the model asks for tools (native tool calling), they run through ``ReportTools.call`` and
their results go back as ``tool`` messages; after ``turns`` turns one last request with
``tool_choice="none"`` makes it answer from what it gathered; so does reaching ``max_calls`` tool
calls in all (calls asked beyond it are answered with an error, not run). An empty answer before
the last turn is asked for again once per turn. An endpoint that refuses tool calling on the first
request (400 or 422) raises ``ToolsRefused``, so the caller can gather evidence itself.
"""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from engine.llm.errors import RequestRejected

OnCall = Callable[[str], Awaitable[None]]   # told the name of each tool before it runs


class ToolsRefused(Exception):
    """The endpoint refused a request with ``tools`` before any tool ran."""

    def __init__(self, cause: RequestRejected):
        super().__init__(str(cause))
        self.cause = cause


async def tool_loop(llm, messages: list[dict[str, Any]], tools, turns: int, *, final_prompt: str,
                    empty_prompt: str, job: str | None, scope: str | None,
                    on_call: OnCall | None = None, max_calls: int | None = None) -> str:
    """Run at most ``turns`` tool turns (and ``max_calls`` tool calls) over ``messages`` (extended
    in place) and return the model's text ('' when it gave none even on the last turn).
    ``tools``: a ``ReportTools``."""
    schemas = tools.schemas()
    spent = False   # max_calls reached: the next turn is the last
    for turn in range(turns + 1):
        final = turn == turns or spent
        if final:
            messages.append({"role": "user", "content": final_prompt})
        try:
            message = await llm.complete(messages, tools=schemas, tool_choice="none" if final else "auto",
                                         job=job, scope=scope)
        except RequestRejected as err:
            if turn or err.status_code not in (400, 422):
                raise
            raise ToolsRefused(err) from None
        text = (message.content or "").strip()
        if not message.tool_calls or final:
            if text or final:
                return text
            messages.append({"role": "user", "content": empty_prompt})
            continue
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            if max_calls is not None and len(tools.calls) >= max_calls:
                # every tool_call still gets its tool message, or the next request is refused
                result = json.dumps({"error": f"no more tool calls for this question ({max_calls} at most); "
                                              "answer from what you found"})
            else:
                if on_call is not None:
                    await on_call(call.function.name)
                result = await tools.call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        spent = max_calls is not None and len(tools.calls) >= max_calls
    raise AssertionError("unreachable: the last turn always returns")
