"""glibc's malloc: two arenas, and freed memory given back, for the operator process and the
processes it starts.

glibc gives each thread that allocates an arena of its own, up to eight per core, and memory
freed in one arena is reused only by the threads allocating there. The operator's threads (its
event loop, kopf's per controller, the default executor's) each grew one, so its resident
memory was the sum of their high-water marks; two arenas lower it at rest and at the peak
(docs/performance.md, "Memory").
The image sets the variable; ``lws-operator run`` sets the same limit itself
when nothing did, so an operator started any other way (a wheel installed by hand, a chart with
another image, the benchmarks) runs the same, and so do its children (the admission process and
the certificate planner inherit the variable).

glibc also keeps freed memory: an allocation above its mmap threshold (128 KiB) is mapped and
unmapped on its own, but freeing one raises the threshold, up to 32 MiB, so the next large
buffers (a LIST's body, its decoded pages, the read buffers of a burst of answers) come from the
heap instead, and the heap keeps what they leave behind. ``trim_freed_memory`` fixes both
thresholds at 128 KiB (setting either stops the raising, ``mallopt(3)``): large buffers are
unmapped when freed and a heap top above 128 KiB free is given back: less resident memory
after large listings, in no more CPU time (docs/performance.md, "Memory").
"""

from __future__ import annotations

import ctypes
import os

ARENAS = 2
TRIM_THRESHOLD = 128 * 1024  # glibc's default mmap threshold, kept
_M_TRIM_THRESHOLD = -1  # malloc.h
_M_ARENA_MAX = -8


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Limit this process (glibc only) and the processes it starts to ``arenas`` malloc arenas,
    unless ``MALLOC_ARENA_MAX`` was set by whoever started it (glibc read it already). Call it
    before any thread allocates. True when the limit was set here."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    os.environ["MALLOC_ARENA_MAX"] = str(arenas)
    return _mallopt(_M_ARENA_MAX, arenas)


def trim_freed_memory(threshold: int = TRIM_THRESHOLD) -> bool:
    """Give freed memory back to the system (module docstring) in this process (glibc only) and
    the processes it starts, unless whoever started it set glibc's trim or mmap threshold. True
    when it was set here."""
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(threshold)
    return _mallopt(_M_TRIM_THRESHOLD, threshold)


def _mallopt(param: int, value: int) -> bool:
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        glibc = None
    if not glibc:
        return False
    return bool(ctypes.CDLL(None).mallopt(param, value))
