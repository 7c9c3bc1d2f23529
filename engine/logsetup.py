"""Logging: one format, and secrets from the environment are never written out.

The handler's formatter masks secret values in the whole formatted record, tracebacks
included (``engine.redact``).
"""
from __future__ import annotations

import logging

from engine.config import Config
from engine.redact import RedactingFormatter, Redactor

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def secret_env_names(config: Config) -> list[str]:
    """Every environment variable the configuration names as holding a secret (``*_env`` keys)."""
    names = []
    for section in config.__dict__.values():
        for key, value in getattr(section, "__dict__", {}).items():
            if key.endswith("_env") and isinstance(value, str) and value:
                names.append(value)
    return names


def setup_logging(config: Config) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, Redactor.from_environ(extra_names=secret_env_names(config))))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.bot.log_level)
    for noisy in ("httpx", "discord.gateway", "apscheduler", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
