"""The run child's output passes through a secret mask on its way to ``run.log``.

The parent points the child's stderr at ``run.log``, and the child points file descriptor 1
there too (library prints). Python tracebacks, camel's and oasis's log lines and anything a C
library writes all go through these two descriptors, so ``mask_output`` replaces both with the
write end of a pipe; a thread reads the pipe, masks secret values line by line (a secret never
spans a newline) and writes the result to the file. At exit the descriptors are pointed back
at the file, which ends the pipe, and the thread drains what is left.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading

from engine.redact import Redactor

_CHUNK = 1 << 16
_LINE_END = re.compile(rb"[\n\r]")
_MAX_PENDING = 1 << 16  # a longer line without an end is written as it is (masked)


def _pump(read_fd: int, out_fd: int, redactor: Redactor) -> None:
    def write(data: bytes) -> None:
        text = redactor.mask(data.decode("utf-8", "surrogateescape"))
        payload = text.encode("utf-8", "surrogateescape")
        try:
            while payload:
                payload = payload[os.write(out_fd, payload):]
        except OSError:  # a full disk loses log text; the pipe must still drain or writers block
            pass

    pending = b""
    while chunk := os.read(read_fd, _CHUNK):
        pending += chunk
        ends = [m.end() for m in _LINE_END.finditer(pending)]
        cut = ends[-1] if ends else (len(pending) if len(pending) > _MAX_PENDING else 0)
        if cut:
            write(pending[:cut])
            pending = pending[cut:]
    if pending:
        write(pending)
    os.close(read_fd)


def mask_output(redactor: Redactor) -> None:
    """From now on, whatever this process writes to descriptors 1 and 2 reaches the file that
    descriptor 2 pointed at with ``redactor``'s secrets masked. Nothing changes without secrets."""
    if not redactor.values:
        return
    target = os.dup(2)
    read_fd, write_fd = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    pump = threading.Thread(target=_pump, args=(read_fd, target, redactor), name="mask-output", daemon=True)
    pump.start()

    def drain() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(target, 1)  # the pipe's last write ends close: the pump sees its end
        os.dup2(target, 2)
        pump.join(timeout=10)

    atexit.register(drain)
