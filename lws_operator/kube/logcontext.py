"""Which LeaderWorkerSet (and which group of it) a log line is about, without passing it around.

The reconcile worker binds ``lws`` (``namespace/name``) for the duration of a pass; the controller
binds ``group`` (the group index) while it works on one group. Both are context variables, so
concurrent passes on one event loop never see each other's values. ``ContextFilter`` copies them
onto every log record, where the JSON formatter picks them up; a value given explicitly with
``extra={"lws": ...}`` wins.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Hashable, Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["GROUP", "LWS", "ContextFilter", "bind_group", "reconciling"]

LWS: ContextVar[str | None] = ContextVar("lws", default=None)
GROUP: ContextVar[str | None] = ContextVar("group", default=None)


def _key_text(key: Hashable) -> str:
    if isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key):
        return f"{key[0]}/{key[1]}"
    return str(key)


@contextlib.contextmanager
def reconciling(key: Hashable) -> Iterator[None]:
    """``lws`` = the key for the block; ``group`` unset at its start and restored after it."""
    lws = LWS.set(_key_text(key))
    group = GROUP.set(None)
    try:
        yield
    finally:
        GROUP.reset(group)
        LWS.reset(lws)


def bind_group(index: Any) -> None:
    """Log lines from here on (within the current pass) are about group ``index``; None
    clears it."""
    GROUP.set(None if index is None or index == "" else str(index))


class ContextFilter(logging.Filter):
    """Adds ``lws`` and ``group`` attributes to every record that passes (None when unbound)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "lws", None) is None:
            record.lws = LWS.get()
        if getattr(record, "group", None) is None:
            record.group = GROUP.get()
        return True
