"""Logging: one format, and secrets from the environment are never written out."""
from __future__ import annotations

import logging
import os
import re

from engine.config import Config

_SECRET_ENV = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD)", re.I)


class RedactSecrets(logging.Filter):
    """Replace the value of any secret-looking environment variable in log records."""

    def __init__(self, extra_names: list[str] | None = None):
        super().__init__()
        names = [n for n in os.environ if _SECRET_ENV.search(n)] + list(extra_names or [])
        self.values = sorted({os.environ[n] for n in names if len(os.environ.get(n, "")) >= 6},
                             key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.values:
            text = record.getMessage()
            if any(v in text for v in self.values):
                for v in self.values:
                    text = text.replace(v, "***")
                record.msg, record.args = text, ()
        return True


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
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(secret_env_names(config)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.bot.log_level)
    for noisy in ("httpx", "discord.gateway", "apscheduler", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
