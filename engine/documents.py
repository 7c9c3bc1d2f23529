"""Read the documents a simulation starts from: .txt .md .pdf .docx .html, each in a sandbox.

A document comes from whoever sends it and is read before anyone confirms anything, so
``read_documents`` never parses it in the bot: each document is parsed by a child process of
its own (``python -m engine.docparse``, which holds the parsing code and its contract) that
limits itself before it reads a byte: processor time (``[documents] parse_cpu_s``), address
space (``parse_memory_mb``), lower priority, no files written. The parent waits without
blocking the event loop or the CPU pool embeddings use, kills the child at the wall-clock limit
(``parse_timeout_s``), and turns whatever ended it into one line naming the file and the
limit. At most ``parse_processes`` children run at once; the child sees only the basic
environment (``engine.sim.run.child_env``: no token, no key). Starting one costs about 0.1-0.3 s.

Limits that need no parsing (a missing file, a folder, an unsupported type, empty, too large,
too many files) are checked here first, for every file, before any child starts. Every bad
file gets one DocumentError naming the file and the problem. ``load_document`` parses in the
calling process, without the sandbox (tests; the child runs the same code).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from engine import docparse
from engine.config import DocumentsSection
from engine.i18n import _
from engine.jobs import JobError
from engine.sim.run.child_env import child_environment

log = logging.getLogger(__name__)

SUPPORTED = docparse.SUPPORTED
REPO_ROOT = Path(__file__).resolve().parents[1]


class DocumentError(JobError):
    """A document cannot be used; the message says which one and why, in the current language.
    Resuming reads the same file again, so it cannot help."""

    resumable = False


def refused(msgid: str, values: dict[str, str]) -> DocumentError:
    """A refusal of docparse (an English msgid and its values) in the current language; a value
    that is a msgid itself (what a file is) is translated too."""
    return DocumentError(_(msgid, **{k: _(v) for k, v in values.items()}))


@dataclass
class Document:
    name: str
    text: str
    pages: int = 1

    @property
    def chars(self) -> int:
        return len(self.text)


def check_document(path: Path, limits: DocumentsSection) -> None:
    """Cheap checks that read no content: exists, supported type, size."""
    try:
        docparse.check_file(Path(path), limits)
    except docparse.Refused as refusal:
        raise refused(refusal.msgid, refusal.values) from None


def load_document(path: str | Path, limits: DocumentsSection) -> Document:
    """Check and parse one document in this process, without the sandbox (blocking)."""
    try:
        return Document(**docparse.parse(Path(path), limits))
    except docparse.Refused as refusal:
        raise refused(refusal.msgid, refusal.values) from None


_gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its semaphore


def _gate(size: int) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    if (gate := _gates.get(loop)) is None:
        gate = _gates[loop] = asyncio.Semaphore(size)
    return gate


def sandbox_command() -> tuple[list[str], dict[str, str]]:
    """The child's argv and environment (-P: the working folder is not put on the module path)."""
    env = child_environment(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-P", "-m", "engine.docparse"], env


def sandbox_request(path: Path, limits: DocumentsSection) -> bytes:
    """What the child reads on stdin (docparse.main)."""
    return json.dumps({"path": str(Path(path).resolve()), "limits": limits.model_dump(),
                       "cpu_s": limits.parse_cpu_s, "memory_mb": limits.parse_memory_mb}).encode()


def sandbox_outcome(name: str, returncode: int, out: bytes, err: bytes, limits: DocumentsSection) -> Document:
    """The document a finished child read, or the DocumentError that says why there is none."""
    answer = None
    if returncode == 0:
        try:
            answer = json.loads(out)
        except ValueError:
            pass
    if answer is None:
        if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            raise DocumentError(_("{name}: reading it needed more than {seconds} s of processor time (limit "
                                  "[documents] parse_cpu_s)", name=name, seconds=f"{limits.parse_cpu_s:g}"))
        if b"MemoryError" in err:
            answer = {"limit": docparse.MEMORY_EXCEEDED}
        else:
            log.warning("the document parser ended with code %s on %s: %s", returncode, name,
                        err.decode("utf-8", "replace")[-500:])
            raise DocumentError(_("{name}: the file could not be read (the parser failed on it)", name=name))
    for logger, level, message in answer.get("notes", []):
        logging.getLogger(logger).log(level, "%s", message)
    if "refused" in answer:
        raise refused(answer["refused"]["msgid"], answer["refused"]["values"])
    if answer.get("limit") == docparse.MEMORY_EXCEEDED:
        raise DocumentError(_("{name}: reading it needed more than {mib} MiB of memory (limit [documents] "
                              "parse_memory_mb)", name=name, mib=f"{limits.parse_memory_mb:,}"))
    return Document(**answer["document"])


def timed_out(name: str, limits: DocumentsSection) -> DocumentError:
    return DocumentError(_("{name}: reading it took longer than {seconds} s (limit [documents] parse_timeout_s)",
                           name=name, seconds=f"{limits.parse_timeout_s:g}"))


async def parse_in_sandbox(path: Path, limits: DocumentsSection) -> Document:
    """Parse one document in a child process under the [documents] limits; DocumentError when
    the file is refused or the child ran into a limit."""
    argv, env = sandbox_command()
    async with _gate(limits.parse_processes):
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env)
        try:
            out, err = await asyncio.wait_for(proc.communicate(sandbox_request(path, limits)),
                                              limits.parse_timeout_s)
        except asyncio.TimeoutError:
            raise timed_out(Path(path).name, limits) from None
        finally:
            if proc.returncode is None:  # timed out, or the caller was cancelled
                proc.kill()
                await proc.wait()
    assert proc.returncode is not None  # the child was waited for
    return sandbox_outcome(Path(path).name, proc.returncode, out, err, limits)


async def read_documents(paths: Sequence[str | Path], limits: DocumentsSection) -> list[Document]:
    """Check every file first (cheap), then parse each in the sandbox."""
    if not paths:
        raise DocumentError(_("no document given"))
    if len(paths) > limits.max_files:
        raise DocumentError(_("too many documents ({count}; the limit is {limit})", count=len(paths),
                              limit=limits.max_files))
    for p in paths:
        check_document(Path(p), limits)
    docs = [await parse_in_sandbox(Path(p), limits) for p in paths]
    total = sum(d.chars for d in docs)
    if total > limits.max_chars:
        raise DocumentError(_("the documents are too long together ({chars} characters; the limit is {limit})",
                              chars=f"{total:,}", limit=f"{limits.max_chars:,}"))
    return docs
