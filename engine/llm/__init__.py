"""The LLM layer: one client for every OpenAI-compatible endpoint (see ``client``)."""
from engine.llm.client import LLMClient
from engine.llm.errors import BudgetExceeded, InvalidAnswer, LLMError, LLMNotConfigured
from engine.llm.usage import Usage

__all__ = ["LLMClient", "LLMError", "LLMNotConfigured", "BudgetExceeded", "InvalidAnswer", "Usage"]
