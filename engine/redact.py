"""Secret values never leave the process in writing: log lines, tracebacks, a run's run.log.

A secret is the value of an environment variable whose name looks secret (``TOKEN``, ``KEY``,
``SECRET``, ``PASSWORD``) or that the configuration names in a ``*_env`` key. A ``Redactor``
replaces every such value in a text; ``RedactingFormatter`` applies it to the whole formatted
log record, so a secret inside an exception message or a traceback line is masked too (a
logging filter only sees the message, not the traceback formatted after it). Values shorter
than six characters are left alone: masking "1" or "true" would mangle ordinary text.

A password written into a URL (``postgresql://bot:pw@host/db`` or ``…?password=pw``, as a
database URL given on the command line may be) is masked too, whatever its length, wherever a
Redactor masks and in ``mask_url_passwords`` (the database's label in messages).
"""
from __future__ import annotations

import logging
import os
import re
from typing import Iterable, Mapping

SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD)", re.I)
# scheme://user:PASSWORD@host and a ?password=/&password= query parameter
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^\s/?#]+(?=@[^@\s/?#]*)"
                           r"|(?P<query>[?&]password=)[^&#\s'\"]+", re.I)
MASK = "***"
MIN_SECRET_LEN = 6


def mask_url_passwords(text: str) -> str:
    """``text`` with every password written into a URL replaced by ``***``."""
    return _URL_PASSWORD.sub(lambda m: (m.group("head") or m.group("query")) + MASK, text)


def looks_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def secret_values(environ: Mapping[str, str], extra_names: Iterable[str] = ()) -> list[str]:
    """The values to mask: secret-looking variables plus ``extra_names``, longest first."""
    names = [n for n in environ if looks_secret(n)] + list(extra_names)
    values = {environ.get(n, "").strip() for n in names}
    return sorted((v for v in values if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)


class Redactor:
    """Replaces each known secret value in a text with ``***``."""

    def __init__(self, values: Iterable[str]):
        self.values = sorted({v for v in values if len(v) >= MIN_SECRET_LEN}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, self.values))) if self.values else None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, extra_names: Iterable[str] = ()) -> "Redactor":
        return cls(secret_values(os.environ if environ is None else environ, extra_names))

    @property
    def longest(self) -> int:
        return len(self.values[0]) if self.values else 0

    def mask(self, text: str) -> str:
        text = mask_url_passwords(text)
        return self._pattern.sub(MASK, text) if self._pattern is not None else text


class RedactingFormatter(logging.Formatter):
    """A formatter whose whole output (message, exception, stack) has secrets masked."""

    def __init__(self, fmt: str, redactor: Redactor):
        super().__init__(fmt)
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.mask(super().format(record))
