"""The report agent's bounded tool-calling loop, shared by the report writer and report chat.

While the model asks for tools (native tool calling), they run through ``ReportTools.call`` and
their results go back as ``tool`` messages; after ``turns`` turns one last request with
``tool_choice="none"`` makes it answer from what it gathered. An empty answer before the last
turn is asked for again once per turn. An endpoint that refuses tool calling on the first
request (400 or 422) raises ``ToolsRefused``, so the caller can gather evidence itself.
"""
from __future__ import annotations

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
                    on_call: OnCall | None = None) -> str:
    """Run at most ``turns`` tool turns over ``messages`` (extended in place) and return the
    model's text ('' when it gave none even on the last turn). ``tools``: a ``ReportTools``."""
    schemas = tools.schemas()
    for turn in range(turns + 1):
        final = turn == turns
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
            if on_call is not None:
                await on_call(call.function.name)
            result = await tools.call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("unreachable: the last turn always returns")
