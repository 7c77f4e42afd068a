"""Reliability runs: faults injected into a working system, which must converge.

Every module here has two sizes. ``make chaos-short`` runs the short one, enough to exercise each
fault path once or a few times; ``make chaos`` sets ``LWS_CHAOS=full`` and runs the full one (50
operator kills, 2,000 fuzzed specs, 30 minutes of load, ...). Modules ask :func:`size` rather
than reading the variable, so the two stay one switch.

``make test`` (and so CI) keeps one representative run, the operator kills, the watch gap
(``test_watch_gaps.py``: one API server restart over a compacted etcd, on a cluster of its own),
and the fuzzing's pure-rule and rejection cases: the scenarios marked ``chaos_run`` (API server
and webhook faults, leader failover, certificate rotation, load, the fuzzed specs converging)
cost about six and a half minutes of its thirty and are left to ``make chaos-short``, as is the
group safety fuzz (drains, template changes and operator kills; about 75 s short).
"""

from __future__ import annotations

import os

FULL = os.environ.get("LWS_CHAOS") == "full"


def size(short: int, full: int) -> int:
    """``full`` under ``make chaos``, ``short`` otherwise (CI)."""
    return full if FULL else short
