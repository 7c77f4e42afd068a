"""Go's ``time.ParseDuration``, as ``metav1.Duration`` decodes a duration: the configuration
file's durations (``api.config``) and the command line's (``flags``).

A module of its own so that ``lws-operator run`` reads its flags without importing the
configuration file's models (pydantic): it forks its admission child before them
(``admission.fork``), so that the child does not keep pages the parent rewrites.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

__all__ = ["parse_go_duration"]

# Go's time.ParseDuration units.
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
             "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(value: Any) -> dt.timedelta:
    """A duration as Go writes it (``15s``, ``1m30s``, ``500ms``, ``0``); strings only, as
    ``metav1.Duration`` accepts only strings."""
    if isinstance(value, dt.timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a duration must be a string such as \"15s\", got {value!r}")
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return dt.timedelta(0)
    pos, total = 0, 0.0
    for match in _GO_DURATION.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(f"invalid duration {value!r} (e.g. \"15s\", \"1m30s\", \"500ms\")")
    return dt.timedelta(seconds=sign * total)
