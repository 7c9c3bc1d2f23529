"""Logging: one format, and secrets from the environment are never written out.

The handler's formatter masks secret values in the whole formatted record, tracebacks
included (``engine.redact``).
"""
from __future__ import annotations

import logging

from engine.config import Config
from engine.redact import RedactingFormatter, Redactor

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries whose warnings are notes about a user's file ("invalid pdf header"), not about the
# bot: they are logged at INFO, so they never reach a console user's screen at the default level.
FILE_NOTE_LOGGERS = ("pypdf", "docx")
# Libraries that log a traceback with a warning they recover from: asyncpg's pool while a
# PostgreSQL restart refuses connections. The warning is kept, as one line with its reason.
ONE_LINE_LOGGERS = ("asyncpg",)


class DemoteFileNotes(logging.Filter):
    """Lower warnings of FILE_NOTE_LOGGERS (and their children) to INFO, and drop them when the
    log shows less than ``level``; their errors stay as they are. (A handler filter runs after
    the level check, so the demoted record is checked here.)"""

    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR and record.name.split(".", 1)[0] in FILE_NOTE_LOGGERS:
            record.levelno = min(record.levelno, logging.INFO)
            record.levelname = logging.getLevelName(record.levelno)
            return record.levelno >= self.level
        return True


class OneLineWarnings(logging.Filter):
    """A warning of ONE_LINE_LOGGERS (and their children) with a traceback becomes one line: the
    exception's type and message after the warning's own; errors keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno < logging.ERROR and record.exc_info and record.exc_info[1] is not None
                and record.name.split(".", 1)[0] in ONE_LINE_LOGGERS):
            err = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(err).__name__}: {err})"
            record.args, record.exc_info, record.exc_text = None, None, None
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
    handler.setFormatter(RedactingFormatter(LOG_FORMAT, Redactor.from_environ(extra_names=secret_env_names(config))))
    handler.addFilter(DemoteFileNotes(logging.getLevelName(config.bot.log_level)))
    handler.addFilter(OneLineWarnings())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.bot.log_level)
    for noisy in ("httpx", "discord.gateway", "apscheduler", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
