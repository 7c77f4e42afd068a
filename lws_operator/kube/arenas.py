"""glibc's malloc arenas: two for the operator process and the processes it starts.

glibc gives each thread that allocates an arena of its own, up to eight per core, and memory
freed in one arena is reused only by the threads allocating there. The operator's threads (its
event loop, kopf's per controller, the default executor's) each grew one, so its resident
memory was the sum of their high-water marks. Measured with the cold-start benchmark at 5,000
pods when the image set ``MALLOC_ARENA_MAX=2``: 148 MiB at rest and 157 MiB peak with it, 163
and 163 without. The image sets the variable; ``lws-operator run`` sets the same limit itself
when nothing did, so an operator started any other way (a wheel installed by hand, a chart with
another image, the benchmarks) runs the same, and so do its children (the admission process and
the certificate planner inherit the variable).
"""

from __future__ import annotations

import ctypes
import os

ARENAS = 2
_M_ARENA_MAX = -8  # malloc.h


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Limit this process (glibc only) and the processes it starts to ``arenas`` malloc arenas,
    unless ``MALLOC_ARENA_MAX`` was set by whoever started it (glibc read it already). Call it
    before any thread allocates. True when the limit was set here."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    os.environ["MALLOC_ARENA_MAX"] = str(arenas)
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        glibc = None
    if not glibc:
        return False
    return bool(ctypes.CDLL(None).mallopt(_M_ARENA_MAX, arenas))
