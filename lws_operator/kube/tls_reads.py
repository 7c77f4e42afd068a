"""TLS plaintext read one record's worth at a time, not 256 KiB at a time, under uvloop.

uvloop runs ``lws-operator run`` and the admission process (``__main__``). Its TLS layer hands a
plain ``asyncio.Protocol`` (aiohttp's client connections: every request and watch of the
operator; the webhook server's connections) the plaintext of each readable socket by calling
``SSLObject.read(256 KiB)`` until nothing is left. CPython allocates a bytes object of the size
asked for on every call and shrinks it to what OpenSSL returned, which is never more than one
TLS record: 16 KiB of plaintext. Both processes fix glibc's mmap threshold at 128 KiB
(``kube.arenas``), so every such call mapped a fresh 256 KiB, faulted in the pages it wrote and
unmapped it again (docs/performance.md, "The event loop and TLS"). uvloop's read size is a
compile-time constant, so the cap is put on the ``SSLObject`` itself, through the context's
documented ``sslobject_class`` (which ``SSLContext.wrap_bio`` instantiates, as uvloop calls it).

A read into a caller's buffer (uvloop's path for a ``BufferedProtocol``) allocates nothing and
is left as asked. Asking for less than a record would only take more calls; asking for exactly a
record's plaintext loses nothing, since OpenSSL returns at most one record per read.
"""

from __future__ import annotations

import ssl
from typing import Any

# The most plaintext a TLS record carries (RFC 8446 5.1, RFC 5246 6.2.1: 2^14 bytes).
RECORD = 16 * 1024


class RecordReads(ssl.SSLObject):
    """An ``SSLObject`` whose reads without a buffer ask for at most ``RECORD`` bytes."""

    def read(self, len: int = 1024, buffer: Any = None) -> Any:
        if buffer is None and len > RECORD:
            len = RECORD
        return super().read(len, buffer)


def read_records(context: ssl.SSLContext) -> ssl.SSLContext:
    """Make every connection ``context`` wraps from now on read as ``RecordReads``; returns it."""
    context.sslobject_class = RecordReads
    return context
