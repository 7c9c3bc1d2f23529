"""The shared LLM client, as ``app.services["llm"]``, when an endpoint is configured."""
from __future__ import annotations

from engine.llm import LLMClient


def setup(app) -> None:
    if not app.config.llm.configured:
        return
    llm = LLMClient(app.config.llm, app.db)
    app.services["llm"] = llm
    app.on_stop.append(llm.close)
