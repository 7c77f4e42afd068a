"""Counting the operator's writes, from its own ``lws_operator_api_requests`` counters."""

from __future__ import annotations

# The verbs of our client's request counter that change something.
WRITE_VERBS = frozenset({"create", "update", "patch", "apply", "delete", "deletecollection"})
