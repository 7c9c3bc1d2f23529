"""What a chat may be told of a failure: a human line, free of the bot's internals.

Errors carry details for whoever runs the bot: the LLM endpoint's address, paths on the bot's
server (a document, a simulation's folder, a run's log), Python's names for exceptions. The log
(and the command line, where the operator sits) keeps them; a chat, which anyone in a public
server may read, gets the line without them:

- ``failure(label)``: a command or job that failed in a way nobody foresaw (a bug, a full disk)
  says so in words, never with the exception's type or text;
- ``public(text)``: an error meant for people (a JobError, an LLM failure, a run's reason to
  stop) loses every URL and every absolute path but its last name;
- ``job_error(job)``: why a job failed, as a chat shows it: ``failure`` for an unforeseen one
  (engine.jobs marks it), ``public`` of its error otherwise;
- ``kept_where(path, data_dir)``: a file the bot keeps for its operator (too big to upload) is
  named relative to the data folder.

Each line is in the current language (engine.i18n): the chat's, where a command or job writes it.
"""
from __future__ import annotations

import re
from pathlib import Path

from engine.i18n import N_, _
from engine.jobs import Job

# scheme://… up to a space or quote, not ending in punctuation, with the space before it ("The LLM endpoint http://…
# could not be reached" reads "The LLM endpoint could not be reached")
_URL = re.compile(r"\s?\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()]*[^\s'\"<>(),.;:]")
# an absolute path of at least two parts (/srv/bot/x.txt, ~/data/x): "/help" or "/sim status" are
# commands and stay; a path within a word ("and/or", "1/2") is none
_PATH = re.compile(r"(?<![\w.~/])(?:~|/[\w.@%+-]+)(?:/[\w.@%+-]*)+")


def _last_part(match: re.Match) -> str:
    return match.group(0).rstrip("/").rsplit("/", 1)[-1]


def public(text: str) -> str:
    """``text`` without URLs and absolute paths (a file or folder keeps its last name)."""
    return _PATH.sub(_last_part, _URL.sub("", text)).strip()


INSIDE = N_("an error inside the bot; its operator finds the details in the bot's log.")


def failure(label: str) -> str:
    """A failure nobody foresaw, in words: the details went to the log."""
    return _("{label} failed because of {inside}", label=label, inside=_(INSIDE))


def job_error(job: Job) -> str:
    """Why ``job`` failed, for a chat ('' when it has no error)."""
    if not job.error:
        return ""
    return _(INSIDE) if job.unforeseen else public(job.error)


def kept_where(path: Path, data_dir: Path) -> str:
    """Where a kept file lies, as the chat may be told: relative to the data folder."""
    try:
        return _("in the bot's data folder as {path}", path=Path(path).resolve().relative_to(Path(data_dir).resolve()))
    except ValueError:
        return _("on the bot's server as {name}", name=Path(path).name)
