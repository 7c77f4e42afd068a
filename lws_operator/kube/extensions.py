"""The optional C extension the operator does without: frozenlist's.

frozenlist's extension is written in C++, and importing it maps the C++ runtime (libstdc++),
which nothing else the operator imports needs: about 1 MiB resident (docs/performance.md,
"Memory"). aiohttp keeps in frozen lists only its signals (the client's request tracing, which
the operator does not configure, and the web servers' start and stop hooks) and its web
applications' middleware list, walked once per health probe or metrics scrape, never per API
request; frozenlist's own pure-Python class does the same there at no cost that shows.

frozenlist chooses with its ``FROZENLIST_NO_EXTENSIONS`` variable, read when it is imported, so
``lws-operator run`` sets it before it imports aiohttp, unless whoever started it set it; the
image sets it too.
"""

from __future__ import annotations

import os

VARIABLE = "FROZENLIST_NO_EXTENSIONS"


def skip_frozenlist_extension() -> bool:
    """Have frozenlist, when imported from now on (by aiohttp), use its pure-Python class,
    unless the environment already chose. True when set here."""
    if VARIABLE in os.environ:
        return False
    os.environ[VARIABLE] = "1"
    return True
