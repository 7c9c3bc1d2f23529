"""glibc hands freed memory back (engine.allocator), in a fresh interpreter each: 200 blocks of
1 MiB are allocated, written, and freed below a small block that pins the top of the heap. After a
4 MiB block was freed, glibc's dynamic threshold serves such blocks from the heap and keeps them
when freed, unless the threshold is fixed (``configure``) or the free pages are trimmed (``trim``)."""
from __future__ import annotations

from tests.helpers.probe import probe_json

PROBE = """
import ctypes, sys
from engine import allocator
if sys.argv[1] == "configured":
    assert allocator.configure()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_mb():
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmRSS"))) // 1024
libc.free(libc.malloc(4 << 20))
before = rss_mb()
blocks = [libc.malloc(1 << 20) for _ in range(200)]
for block in blocks:
    ctypes.memset(block, 1, 1 << 20)
pin = libc.malloc(64)
for block in blocks:
    libc.free(block)
if sys.argv[1] == "trimmed":
    allocator.trim()
print(rss_mb() - before)
"""


def kept_mb(mode: str) -> int:
    return int(probe_json(PROBE, mode, timeout=60))


def test_freed_blocks_go_back_to_the_system_once_configured_or_trimmed():
    assert kept_mb("plain") > 150          # glibc's defaults: the freed 200 MiB stay resident
    assert kept_mb("configured") < 20      # mapped on their own, unmapped when freed
    assert kept_mb("trimmed") < 20         # trimmed: the free pages handed back
